package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/target"
)

// Release is Quarantine's undo, for an object since repaired or restored in place: it puts it
// back only if it passes its checks, else nothing is written (ErrCorrupt for bytes that fail
// them, ErrInvalidInput for a WAL object the shard sealed past). A base run must be at most
// the merge budget (checkReleasedRun) and decode into exactly the rows and key range recorded
// (compaction kept tombstones meanwhile, so nothing deleted resurrects); a WAL object must
// decode and lie above replay_after, and its release fences the shard's owner so that its
// next append replays it; a generation cannot be put back, since merges passed its number.

// Release puts the quarantined object at key back into service. Releasing an object that is
// live already changes nothing (NotQuarantined).
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) Release(ctx context.Context, key string) (QuarantineResult, error) {
	if err := objstore.CheckKey(key); err != nil {
		return QuarantineResult{}, err
	}
	if strings.HasPrefix(key, dataPrefix(s.target)) {
		return s.releaseRun(ctx, key)
	}
	if rest, ok := strings.CutPrefix(key, memWALPrefix(s.target)); ok {
		if shard, _, ok := strings.Cut(rest, "/wal/"); ok && shard != "" {
			if pos, ok := parseWALKey(walPrefix(s.target, shard), key); ok {
				return s.releaseWAL(ctx, shard, pos, key)
			}
		}
		if shard, _, ok := strings.Cut(rest, "/gen/"); ok && shard != "" {
			return QuarantineResult{}, invalidf("%s is a generation: a generation cannot be put back, since merges pass its number while it is set aside", key)
		}
	}
	return QuarantineResult{}, invalidf("%s is not a WAL object or base run of %s", key, s.target)
}

func (s *Store) releaseRun(ctx context.Context, key string) (QuarantineResult, error) {
	res := QuarantineResult{Kind: "run", Path: key}
	base, err := s.loadBase(ctx)
	if err != nil {
		return res, err
	}
	q, ok := findQuarantined(base.Quarantined, key)
	if !ok {
		if base.References(key) {
			res.NotQuarantined, res.ManifestVersion = true, base.Version
			return res, nil
		}
		return res, fmt.Errorf("run %s is not quarantined in base version %d of %s: %w", key, base.Version, s.target, ErrNotFound)
	}
	run, err := s.checkReleasedRun(ctx, q)
	if err != nil {
		return res, err
	}
	res.Rows, res.MinKey, res.MaxKey = run.Rows, run.MinKey, run.MaxKey
	base, err = s.editBase(ctx, base, func(base *manifest.Base) (*manifest.Base, error) {
		i := slices.IndexFunc(base.Quarantined, func(o manifest.QuarantinedObject) bool { return o.Path == key })
		if i < 0 {
			res.NotQuarantined = true // a concurrent release won
			return nil, nil
		}
		next := base.Next("release")
		next.Quarantined = slices.Delete(next.Quarantined, i, i+1) // the draft's own copy
		next.Runs = append(next.Runs, run)
		return next, nil
	})
	if err != nil {
		return res, err
	}
	return s.settled(res, base.Version, ""), nil
}

// checkReleasedRun reads the run q names in batches and returns its new manifest entry, or
// ErrCorrupt when it does not hold what q recorded. It reads at most the merge budget (the
// worker's default when this process has none), whose bytes it holds whole: no merge or
// compaction writes a run longer than the budget that holds its input (decision 0771).
func (s *Store) checkReleasedRun(ctx context.Context, q manifest.QuarantinedObject) (_ manifest.Run, err error) {
	defer func() { s.countCorrupt(q.Path, err) }()
	what := "run " + q.Path
	limit := cmp.Or(s.db.opts.Budget.Limit(), DefaultMergeBudgetBytes)
	data, err := s.db.bucket.GetAtMost(ctx, q.Path, limit, nil)
	if errors.Is(err, objstore.ErrTooLarge) {
		return manifest.Run{}, corruptf("%s is longer than the %d bytes a release reads, the merge budget's limit: %v", what, limit, err)
	}
	if err != nil {
		return manifest.Run{}, err
	}
	rb, err := openRunBatches(ctx, memory.DefaultAllocator, data, s.codec, what)
	if err != nil {
		return manifest.Run{}, err
	}
	defer rb.close()
	id := strings.TrimSuffix(strings.TrimPrefix(q.Path, dataPrefix(s.target)), ".parquet")
	r := manifest.Run{ID: id, Path: q.Path, Bytes: int64(len(data)), Checksum: checksumOf(data)}
	for {
		f, err := rb.next(ctx)
		if err != nil {
			return manifest.Run{}, err
		}
		if f == nil {
			break
		}
		for i := range f.n {
			addRunRow(&r, f, i)
		}
		f.rec.Release()
	}
	r.MaxKey = rb.last // the last batch's last key, a copy
	if r.Rows == 0 || r.Rows != q.Rows || r.MinKey != q.MinKey || r.MaxKey != q.MaxKey {
		got := fmt.Sprintf("%d rows", r.Rows)
		if r.Rows > 0 {
			got = fmt.Sprintf("%d rows, keys %q..%q", r.Rows, target.Clip(r.MinKey), target.Clip(r.MaxKey))
		}
		return manifest.Run{}, corruptf("%s: holds %s, the quarantine recorded %d rows, keys %q..%q", what, got, q.Rows, target.Clip(q.MinKey), target.Clip(q.MaxKey))
	}
	return r, nil
}

func (s *Store) releaseWAL(ctx context.Context, shard string, pos uint64, key string) (QuarantineResult, error) {
	res := QuarantineResult{Kind: "wal", Path: key, Shard: shard}
	m, err := s.loadShard(ctx, shard)
	if err != nil {
		return res, err
	}
	if m == nil {
		return res, fmt.Errorf("shard %s of %s: %w", shard, s.target, ErrNotFound)
	}
	if _, ok := findQuarantined(m.Quarantined, key); !ok {
		ok, err := s.db.bucket.Exists(ctx, key)
		if err != nil {
			return res, err
		}
		if ok {
			res.NotQuarantined, res.ManifestVersion = true, m.Version
			return res, nil
		}
		return res, fmt.Errorf("WAL object %s of %s: %w", key, s.target, ErrNotFound)
	}
	recs, err := s.readWAL(ctx, shard, pos)
	if err != nil {
		return res, err
	}
	releaseAll(recs)
	m, err = s.editShard(ctx, shard, func(m *manifest.Shard) (bool, error) {
		i := slices.IndexFunc(m.Quarantined, func(o manifest.QuarantinedObject) bool { return o.Path == key })
		if i < 0 {
			res.NotQuarantined = true // a concurrent release won
			return false, nil
		}
		if pos <= m.ReplayAfter {
			return false, invalidf("WAL object %s is at or below replay_after %d of shard %s: the shard sealed past it while it was set aside and would never replay it", key, m.ReplayAfter, shard)
		}
		m.Quarantined = slices.Delete(m.Quarantined, i, i+1) // m is editShard's draft, a copy
		m.WriterEpoch++                                      // fences the owner, whose memtable lacks the object's rows
		return true, nil
	})
	if err != nil {
		return res, err
	}
	return s.settled(res, m.Version, ""), nil
}
