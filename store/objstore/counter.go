package objstore

import (
	"sync/atomic"
	"time"
)

// RequestCounter is a Faults hook that counts the storage requests made through a bucket
// view, per operation, and optionally adds a modelled round-trip latency to each. Use it as
// b.WithFaults(counter) to measure what a sweep or a reconcile costs in requests (the fleet
// benchmark) without changing what the requests do. Safe for concurrent use.
//
// A backend's own paging is not visible here: one List or Walk call counts once, however
// many pages the backend fetched (mem:// and object stores page by 1000 keys).
type RequestCounter struct {
	// Latency, when set, is slept before every request (the modelled object-store RTT).
	Latency time.Duration

	gets, puts, putIfAbsents, exists, deletes, lists, listDirs atomic.Int64
}

// RequestCounts is a snapshot of a RequestCounter.
type RequestCounts struct {
	Get, Put, PutIfAbsent, Exists, Delete, List, ListDirs int64
}

// Total is the sum over every operation.
func (c RequestCounts) Total() int64 {
	return c.Get + c.Put + c.PutIfAbsent + c.Exists + c.Delete + c.List + c.ListDirs
}

// Sub returns c - o, the requests made between two snapshots.
func (c RequestCounts) Sub(o RequestCounts) RequestCounts {
	return RequestCounts{c.Get - o.Get, c.Put - o.Put, c.PutIfAbsent - o.PutIfAbsent, c.Exists - o.Exists,
		c.Delete - o.Delete, c.List - o.List, c.ListDirs - o.ListDirs}
}

// Counts returns the requests counted so far.
func (r *RequestCounter) Counts() RequestCounts {
	return RequestCounts{r.gets.Load(), r.puts.Load(), r.putIfAbsents.Load(), r.exists.Load(),
		r.deletes.Load(), r.lists.Load(), r.listDirs.Load()}
}

// Before implements Faults: it counts the request and sleeps Latency.
func (r *RequestCounter) Before(op, _ string) error {
	switch op {
	case OpGet:
		r.gets.Add(1)
	case OpPut:
		r.puts.Add(1)
	case OpPutIfAbsent:
		r.putIfAbsents.Add(1)
	case OpExists:
		r.exists.Add(1)
	case OpDelete:
		r.deletes.Add(1)
	case OpList:
		r.lists.Add(1)
	case OpListDirs:
		r.listDirs.Add(1)
	}
	if r.Latency > 0 {
		time.Sleep(r.Latency)
	}
	return nil
}

// After implements Faults: it passes the result through.
func (r *RequestCounter) After(_, _ string, err error) error { return err }
