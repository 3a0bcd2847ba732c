package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// Base runs in reads, bounded by the read budget whatever the run's size. A Get looks a key up
// in a base run that the cache will not keep a row group at a time: it reads the object's bytes
// into a read arena, and decodes only the row groups whose key statistics may hold the key, one
// record batch at a time, into buffers of the read reservation (arrowio_runs.go), instead of the
// whole run into one record on the Go heap. Runs the cache keeps are decoded whole, once, for
// every later read.

// runHit is what a Get found of its key in one base run: the version's ranking fields, and
// its row rendered (copies: nothing aliases the run's buffers, which go back to the pool).
type runHit struct {
	found   bool
	seq     int64
	shard   string
	deleted bool
	row     map[string]any
}

// privateRun reports whether a read decodes run src outside the cache: a read budget is set
// and the cache neither holds nor would keep it (as openGroup decides).
func (s *Store) privateRun(src readSource) bool {
	if !src.run || s.db.opts.ReadBudget.Limit() <= 0 || s.db.cache.keeps(src.bytes) {
		return false
	}
	return s.db.cache.peek(src.path) == nil
}

// getFromRun looks key up in base run src, charged to the read budget: it is admitted with
// the object's bytes, a reader window guessed from them and extra, and once the footer gives
// the real window it grows without waiting (the growth rule). Where growth is refused
// (another read is queued) it gives everything back and returns ErrBudgetBusy with short,
// the bytes it lacked, so that its caller admits it once more with them (readmitIfShort, as
// for a group) and it fails only when the budget cannot give them within readBudgetWait.
func (s *Store) getFromRun(ctx context.Context, src readSource, key string, extra int64) (hit runHit, short int64, err error) {
	budget := s.db.opts.ReadBudget
	hint := arenaEstimate([]int64{src.bytes})
	res, err := s.admitRead(ctx, hint+decodedFileHeap+compactRunGuess(manifest.Run{Bytes: src.bytes})+extra)
	if err != nil {
		return runHit{}, 0, err
	}
	defer res.Release()
	acct := newMemAccount(res, budget)
	arena := newReadArena(acct, hint, 1)
	defer arena.free() // after the batches and the reader, which the deferred calls below release first
	rb, err := s.openPrivateRun(ctx, src, arena, acct)
	if err != nil {
		return runHit{}, 0, err
	}
	defer rb.close()
	if need := acct.Allocated() + rb.window; need > res.Bytes() && !res.TryGrow(need) {
		return runHit{}, need - res.Bytes(), fmt.Errorf("%s: a read of run %s needs %d bytes of the read budget of %d and holds %d: %w",
			s.target, src.path, need, budget.Limit(), res.Bytes(), ErrBudgetBusy)
	}
	rb.keyRowGroups(key)
	for {
		f, err := rb.next(ctx)
		if err != nil {
			s.countCorrupt(err)
			return runHit{}, 0, err
		}
		if f == nil {
			return runHit{}, 0, nil
		}
		s.db.metrics.ReadRunRowsDecoded.Add(float64(f.n))
		if i := f.find(key); i >= 0 {
			v := f.view
			hit = runHit{found: true, seq: v.Seq(i), shard: strings.Clone(v.Shard(i)), deleted: v.Deleted(i)}
			if !hit.deleted {
				hit.row = cloneRow(s.codec.RowJSON(f.rec, i))
			}
			f.rec.Release()
			return hit, 0, nil
		}
		f.rec.Release()
	}
}
