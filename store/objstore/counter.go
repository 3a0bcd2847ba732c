package objstore

import (
	"slices"
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

	n [len(countedOps)]atomic.Int64 // per operation, in countedOps order
}

// countedOps are the operations a RequestCounter counts, in RequestCounts' field order.
var countedOps = [...]string{OpGet, OpPut, OpPutIfAbsent, OpExists, OpDelete, OpList, OpListDirs}

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
	n := &r.n
	return RequestCounts{n[0].Load(), n[1].Load(), n[2].Load(), n[3].Load(), n[4].Load(), n[5].Load(), n[6].Load()}
}

// Before implements Faults: it counts the request and sleeps Latency.
func (r *RequestCounter) Before(op, _ string) error {
	if i := slices.Index(countedOps[:], op); i >= 0 {
		r.n[i].Add(1)
	}
	if r.Latency > 0 {
		time.Sleep(r.Latency)
	}
	return nil
}

// After implements Faults: it passes the result through.
func (r *RequestCounter) After(_, _ string, err error) error { return err }
