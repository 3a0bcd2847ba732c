package store

import (
	"context"
	"fmt"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// listRun streams a private base run for a List's cursor or a Get, a record batch at a time
// into the group's account, only as the merge asks, so a page decodes a batch or two.
type listRun struct {
	s     *Store
	ctx   context.Context // the read's: the batches are decoded after the group is opened
	path  string          // the run's object key
	rb    *runBatches
	acct  *memAccount
	after string
	cur   *sortedFile // the cursor's batch
	err   error
}

// openListRun reads run src into a buffer of alloc and opens it for batches decoded into
// acct from after on.
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

// cursor returns the run's merge cursor at its first key above after (exhausted on err).
func (r *listRun) cursor() *cursor {
	c := &cursor{refill: r.refill, rest: func() bool { return r.err == nil && r.rb.handed < r.rb.selected }}
	r.refill(c)
	return c
}

// refill moves c to the run's next batch with a key above after, releasing the one it was in.
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

// growForRuns grows res, without waiting, to what the group holds with its runs' windows, or
// returns ErrBudgetBusy and what res lacks.
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
