// Package requestcount counts the storage requests made through a bucket view, per
// operation, so that a test can hold a sweep or a reconcile to what it may cost in requests.
package requestcount

import (
	"slices"
	"sync/atomic"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// Counter is an objstore.Faults hook that counts requests without changing them: use it as
// b.WithFaults(counter). Safe for concurrent use.
//
// A backend's own paging is not visible here: one List or Walk call counts once, however
// many pages the backend fetched (mem:// and object stores page by 1000 keys).
type Counter struct {
	n [len(countedOps)]atomic.Int64 // per operation, in countedOps order
}

// countedOps are the operations a Counter counts, in Counts' field order.
var countedOps = [...]string{objstore.OpGet, objstore.OpPut, objstore.OpPutIfAbsent, objstore.OpExists,
	objstore.OpDelete, objstore.OpList, objstore.OpListDirs}

// Counts is a snapshot of a Counter.
type Counts struct {
	Get, Put, PutIfAbsent, Exists, Delete, List, ListDirs int64
}

// Total is the sum over every operation.
func (c Counts) Total() int64 {
	return c.Get + c.Put + c.PutIfAbsent + c.Exists + c.Delete + c.List + c.ListDirs
}

// Sub returns c - o, the requests made between two snapshots.
func (c Counts) Sub(o Counts) Counts {
	return Counts{c.Get - o.Get, c.Put - o.Put, c.PutIfAbsent - o.PutIfAbsent, c.Exists - o.Exists,
		c.Delete - o.Delete, c.List - o.List, c.ListDirs - o.ListDirs}
}

// Counts returns the requests counted so far.
func (r *Counter) Counts() Counts {
	n := &r.n
	return Counts{n[0].Load(), n[1].Load(), n[2].Load(), n[3].Load(), n[4].Load(), n[5].Load(), n[6].Load()}
}

// Before implements objstore.Faults: it counts the request.
func (r *Counter) Before(op, _ string) error {
	if i := slices.Index(countedOps[:], op); i >= 0 {
		r.n[i].Add(1)
	}
	return nil
}

// After implements objstore.Faults: it passes the result through.
func (r *Counter) After(_, _ string, err error) error { return err }
