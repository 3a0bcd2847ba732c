package store

import (
	"context"
	"fmt"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// Base runs in a List, bounded by the read budget whatever the run's size: a run the cache
// will not keep is read into the group's read arena and a cursor decodes it a record batch at
// a time, from the first row group past `after`, only when the merge asks for a key beyond the
// one it holds, so a page of 100 rows decodes a batch or two. The group's reservation grows
// without waiting to the window the footers give (runBatches.window) or the read fails with
// ErrBudgetBusy; every batch is allocated through the group's memAccount.

// listRun streams one base run for a List's cursor or a Get (readGroup.find, read_runs.go).
type listRun struct {
	s     *Store
	ctx   context.Context // the read's: the batches are decoded after the group is opened
	path  string          // the run's object key
	rb    *runBatches
	acct  *memAccount
	after string
	// cur is the batch the cursor is in: released when the cursor moves on (refill) or the
	// group is released (close).
	cur *sortedFile
	err error
}

// openListRun reads run src into a buffer of alloc (its group's read arena) and opens it for
// batches decoded into acct's buffers, from after on (its footer only: nothing is decoded
// until the cursor asks).
func (s *Store) openListRun(ctx context.Context, src readSource, alloc objstore.Alloc, acct *memAccount, after string) (*listRun, error) {
	data, err := s.readRunObject(ctx, src.path, src.checksum, src.bytes, alloc)
	if err != nil {
		return nil, err
	}
	rb, err := openRunBatches(ctx, acct, data, s.codec, "run "+src.path)
	if err != nil {
		s.countCorrupt(src.path, err)
		return nil, err
	}
	rb.rowGroupsAfter(after)
	return &listRun{s: s, ctx: ctx, path: src.path, rb: rb, acct: acct, after: after}, nil
}

// cursor returns the run's merge cursor, at its first key above after (decoding the batch
// that holds it), or an exhausted cursor when there is none or the decode failed (err).
func (r *listRun) cursor() *cursor {
	c := &cursor{refill: r.refill, rest: func() bool { return r.err == nil && r.rb.handed < r.rb.selected }}
	r.refill(c)
	return c
}

// refill moves c to the run's next batch that has a key above after, releasing the batch it
// was in, and reports whether there was one.
//
// REQUIRES: the caller copied what it keeps of the rows of c's batch (mergeIter calls refill
// at the start of the next call to next, after the caller is done with the hit it returned).
func (r *listRun) refill(c *cursor) bool {
	if r.cur != nil {
		r.cur.rec.Release()
		r.cur = nil
	}
	c.file, c.i = nil, 0
	for r.err == nil {
		f, err := r.rb.next(r.ctx)
		if err == nil {
			err = r.acct.err() // a batch allocated beyond the reservation
		}
		if err != nil {
			if f != nil {
				f.rec.Release()
			}
			r.s.countCorrupt(r.path, err)
			r.err = err
			return false
		}
		if f == nil {
			return false
		}
		r.s.db.metrics.ReadRunRowsDecoded.Add(float64(f.n))
		if i := f.firstAfter(r.after); i < f.n {
			r.cur, c.file, c.i = f, f, i
			return true
		}
		f.rec.Release() // the start of the first row group: keys at or below after
	}
	return false
}

// close releases the cursor's batch and the reader (the object's bytes are the arena's).
func (r *listRun) close() {
	if r.cur != nil {
		r.cur.rec.Release()
		r.cur = nil
	}
	r.rb.close()
}

// growForRuns grows res, without waiting, to what the group holds once its runs' footers are
// read; when the budget cannot give it, it returns ErrBudgetBusy and the bytes res lacks.
func (s *Store) growForRuns(res *Reservation, acct *memAccount, runs []*listRun) (short int64, _ error) {
	need, streamed := acct.Allocated()+acct.outside.Load(), false
	for _, r := range runs {
		if r != nil {
			need += r.rb.window
			streamed = true
		}
	}
	if !streamed || need <= res.Bytes() || res.TryGrow(need) {
		return 0, nil
	}
	return need - res.Bytes(), fmt.Errorf("%s: a read over base runs needs %d bytes of the read budget of %d and holds %d: %w",
		s.target, need, s.db.opts.ReadBudget.Limit(), res.Bytes(), ErrBudgetBusy)
}
