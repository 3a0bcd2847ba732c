package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// Read sources for List.
const (
	SourceAll  = "all"
	SourceBase = "base"
	SourceWAL  = "wal"
)

// ListOptions page through rows in key order.
type ListOptions struct {
	// Source is all (default), base (merged runs only) or wal (pending generations and
	// this process's memtable only).
	Source string
	// Limit is the page size (default 100, at most 10000).
	Limit int
	// After is the cursor: the page starts after this key (at most MaxKeyBytes).
	After string
	// MaxBytes bounds the page by its rows' JSON text (as rowcodec.RowJSONBytes measures
	// it): the page ends with the row that brings them to MaxBytes, so it holds at most
	// MaxBytes plus one row, and always holds one row (0 = no bound).
	MaxBytes int64
}

// ListPage is one page of rows; Next is empty at the end.
type ListPage struct {
	Rows []map[string]any `json:"rows"`
	Next string           `json:"next"`
}

// readSnapshot is a consistent view: shard manifests are read before the base manifest, so a
// merge committing in between leaves a generation covered by the watermark, never rows missing.
type readSnapshot struct {
	base      *manifest.Base
	pending   map[string][]manifest.Gen
	shards    []string
	manifests map[string]*manifest.Shard // for Stats
}

const readAttempts = 3

func (s *Store) snapshot(ctx context.Context, enforce bool) (*readSnapshot, error) {
	shards, err := s.listShards(ctx)
	if err != nil {
		return nil, err
	}
	manifests := make([]*manifest.Shard, len(shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, sh := range shards {
		g.Go(s.db.guard("shard manifest load", func() error {
			m, err := s.loadShard(gctx, sh)
			manifests[i] = m
			return err
		}))
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	base, err := s.loadBase(ctx)
	if err != nil {
		return nil, err
	}
	snap := &readSnapshot{base: base, pending: map[string][]manifest.Gen{}, manifests: map[string]*manifest.Shard{}}
	total := 0
	worst, worstShard := 0, ""
	for i, sh := range shards {
		if manifests[i] == nil {
			continue
		}
		p := manifests[i].PendingAbove(base.Watermarks[sh])
		snap.manifests[sh] = manifests[i]
		snap.shards = append(snap.shards, sh)
		snap.pending[sh] = p
		total += len(p)
		if len(p) > worst {
			worst, worstShard = len(p), sh
		}
		if !enforce {
			continue
		}
		s.db.metrics.ReadPendingGenerations.Observe(float64(len(p)))
		if warn := s.db.opts.PendingWarn; warn > 0 && len(p) >= warn {
			s.db.log.Warn("many pending generations in shard", zap.String("target", s.target.String()),
				zap.String("shard", sh), zap.Int("pending", len(p)), zap.Int("warn_at", warn))
		}
	}
	if enforce {
		s.db.metrics.ReadShards.Observe(float64(len(shards)))
	}
	if limit := s.db.opts.PendingMax; enforce && limit > 0 && (worst > limit || total > limit) {
		s.db.metrics.ReadsRefused.Inc()
		return nil, fmt.Errorf("%s: shard %s has %d pending generations, %d in total, limit %d: %w",
			s.target, worstShard, worst, total, limit, ErrTooManyPending)
	}
	return snap, nil
}

// load decodes src whole through the cache; grow is asked, without waiting, for the bytes a
// base run's decode holds beyond what the read charged.
func (s *Store) load(ctx context.Context, src readSource, grow func(need int64) bool) (*sortedFile, error) {
	return s.db.cache.get(ctx, src.path, func(ctx context.Context) (*sortedFile, error) {
		if !src.run {
			return s.readGen(ctx, src, nil, memory.DefaultAllocator)
		}
		data, err := s.readRunObject(ctx, src.path, src.checksum, src.bytes, nil)
		if err != nil {
			return nil, err
		}
		f, err := decodeParquetAdmitted(ctx, data, s.codec, "run "+src.path, func(decoded int64) error {
			return s.admitRunDecode(src, decoded, grow)
		})
		if err != nil {
			s.countCorrupt(src.path, err)
			return nil, err
		}
		f.path = src.path // the cache's key
		return f, nil
	})
}

// errRunDecodesLarge refuses to decode whole a base run whose footer gives more than the cache
// keeps: the read streams it instead.
var errRunDecodesLarge = fmt.Errorf("run decodes larger than the cache keeps: %w", ErrBudgetBusy)

// runDecodeShort refuses to decode whole a base run whose reservation could not grow by
// extra without waiting: openGroup admits the group again with them.
type runDecodeShort struct {
	path  string
	extra int64
}

func (e *runDecodeShort) Error() string {
	return fmt.Sprintf("run %s: its decode needs %d bytes more of the read budget: %v", e.path, e.extra, ErrBudgetBusy)
}

func (e *runDecodeShort) Unwrap() error { return ErrBudgetBusy }

// admitRunDecode decides from its footer's decoded size whether a budgeted read may decode
// base run src whole: only one the cache keeps (an eighth more than the footer's page sizes),
// and once grow gave the bytes its decode holds.
func (s *Store) admitRunDecode(src readSource, decoded int64, grow func(need int64) bool) error {
	if s.db.opts.ReadBudget.Limit() <= 0 {
		return nil
	}
	est := decoded + decoded/8
	if !s.db.cache.keeps(est) {
		s.db.cache.large.add(src.path)
		return fmt.Errorf("run %s: its footer gives %d bytes decoded, more than the cache keeps: %w", src.path, decoded, errRunDecodesLarge)
	}
	if need := 2 * est; !grow(need) {
		return &runDecodeShort{path: src.path, extra: need}
	}
	return nil
}

// version is one candidate row version found by a read.
type version struct {
	key     string
	seq     int64
	shard   string
	deleted bool
	file    *sortedFile // nil: memtable row
	row     int
	mem     Row
}

// newer reports whether a beats b: newest write sequence wins, ties broken by shard id.
func newer(aSeq int64, aShard string, bSeq int64, bShard string) bool {
	return cmp.Or(cmp.Compare(aSeq, bSeq), strings.Compare(aShard, bShard)) > 0
}

func (s *Store) toJSON(v version) map[string]any {
	if v.file != nil {
		return s.codec.RowJSON(v.file.rec, v.row)
	}
	return rowcodec.RowToJSON(s.meta.Schema, v.mem)
}

// jsonBytes is the length of the JSON text of toJSON(v), without rendering it.
func (s *Store) jsonBytes(v version) int64 {
	if v.file != nil {
		return s.codec.RowJSONBytes(v.file.rec, v.row)
	}
	return rowcodec.RowToJSONBytes(s.meta.Schema, v.mem)
}

// Get returns the newest version of key. ErrNotFound if absent or deleted.
func (s *Store) Get(ctx context.Context, key string) (map[string]any, error) {
	if key == "" {
		return nil, invalidf("empty key")
	}
	if err := rowcodec.CheckRowKey("key", key); err != nil {
		return nil, err
	}
	return resnapshotOnMissing(ctx, s, func() (map[string]any, error) { return s.getOnce(ctx, key) })
}

// resnapshotOnMissing retries from a fresh snapshot while it misses a file: one the
// latest manifests still reference is ErrCorrupt after readAttempts, and misses of deleted
// files, races lost with a merge or compaction, are ErrConflict after readRaceAttempts
// (decision 0651).
func resnapshotOnMissing[T any](ctx context.Context, s *Store, once func() (T, error)) (T, error) {
	var lastErr error
	var zero T
	for attempt, raced := 0, 0; attempt < readAttempts; {
		v, err := once()
		if err == nil || !errors.Is(err, ErrNotFound) || errors.Is(err, errRowNotFound) {
			if errors.Is(err, ErrBudgetBusy) {
				// Counted here, once a read, whichever step of it the budget refused.
				s.db.metrics.ReadsBudgetBusy.Inc()
			}
			return v, err
		}
		lastErr = err
		s.db.metrics.ReadsRetried.Inc()
		var miss *missingObject
		if errors.As(err, &miss) && !s.referenced(ctx, miss.path) {
			if raced++; raced >= readRaceAttempts {
				return zero, fmt.Errorf("%s: %d attempts in a row lost the race with a merge or compaction that deleted a file they read: %w",
					s.target, raced, ErrConflict)
			}
			continue
		}
		attempt++
	}
	err := corruptf("%s: an object the manifests reference is missing after %d attempts: %v", s.target, readAttempts, lastErr)
	s.countCorrupt("missing object of "+s.target.String(), err) // the key is in lastErr only
	return zero, err
}

// readRaceAttempts bounds a read's attempts that lost a race with a merge or compaction.
const readRaceAttempts = 8

// missingObject is the ErrNotFound of an object a read's manifest entry named.
type missingObject struct {
	path string
	err  error
}

func (e *missingObject) Error() string { return e.err.Error() }
func (e *missingObject) Unwrap() error { return e.err }

// referenced reports whether the latest manifests still list path (true when unreadable).
func (s *Store) referenced(ctx context.Context, path string) bool {
	snap, err := s.snapshot(ctx, false)
	if err != nil || snap.base.References(path) {
		return true
	}
	for _, gens := range snap.pending {
		if slices.ContainsFunc(gens, func(g manifest.Gen) bool { return g.Path == path }) {
			return true
		}
	}
	return false
}

var errRowNotFound = fmt.Errorf("row: %w", ErrNotFound)

func (s *Store) getOnce(ctx context.Context, key string) (map[string]any, error) {
	var memRow *memRow
	var memShard string
	// The memtables are read before the manifests: a row sealed in between is then found in
	// both, never in neither.
	if w := s.readWriter(); w != nil {
		memRow, memShard = w.memGet(key), w.shard
	}
	snap, err := s.snapshot(ctx, true)
	if err != nil {
		return nil, err
	}
	srcs := s.sources(snap, SourceAll, func(lo, hi string) bool { return lo <= key && key <= hi })
	// The newest version so far is rendered before its group is released: one group is held.
	var best *version
	var bestRow map[string]any
	// A streamed base run is a group of its own, looked up a row group at a time.
	var groups [][]readSource
	rest := srcs[:0:0]
	for _, src := range srcs {
		if src.run && s.private(src) {
			groups = append(groups, []readSource{src})
		} else {
			rest = append(rest, src)
		}
	}
	groups = slices.AppendSeq(groups, slices.Chunk(rest, readFanIn))
	for _, grp := range groups {
		g, err := s.openGroup(ctx, grp, "")
		if err != nil {
			return nil, err
		}
		for i := range grp {
			if f, j := g.find(i, key); f != nil && (best == nil || newer(f.view.Seq(j), f.view.Shard(j), best.seq, best.shard)) {
				best = &version{key: key, seq: f.view.Seq(j), shard: f.view.Shard(j), deleted: f.view.Deleted(j), file: f, row: j}
			}
		}
		err = g.err()
		if err == nil && best != nil && best.file != nil {
			if !best.deleted {
				bestRow = cloneRow(s.toJSON(*best))
			}
			best.shard, best.file = strings.Clone(best.shard), nil
		}
		g.release()
		if err != nil {
			return nil, err
		}
	}
	if memRow != nil && (best == nil || newer(memRow.seq, memShard, best.seq, best.shard)) {
		best = &version{key: key, seq: memRow.seq, shard: memShard, deleted: memRow.deleted}
		bestRow = rowcodec.RowToJSON(s.meta.Schema, memRow.row)
	}
	if best == nil || best.deleted {
		return nil, fmt.Errorf("%s: key %q: %w", s.target, key, errRowNotFound)
	}
	return bestRow, nil
}

// List returns one page of rows in key order, newest version per key, tombstones hidden: at
// most opts.Limit rows, and no more than opts.MaxBytes of them plus one row.
func (s *Store) List(ctx context.Context, opts ListOptions) (ListPage, error) {
	switch opts.Source {
	case "":
		opts.Source = SourceAll
	case SourceAll, SourceBase, SourceWAL:
	default:
		return ListPage{}, invalidf("source must be all, base or wal, not %q", opts.Source)
	}
	if opts.Limit < 0 || opts.Limit > 10000 {
		return ListPage{}, invalidf("limit must be between 1 and 10000")
	}
	opts.Limit = cmp.Or(opts.Limit, 100)
	if opts.MaxBytes < 0 {
		return ListPage{}, invalidf("max bytes must not be negative")
	}
	if err := rowcodec.CheckRowKey("the after cursor", opts.After); err != nil {
		return ListPage{}, err
	}
	return resnapshotOnMissing(ctx, s, func() (ListPage, error) { return s.listOnce(ctx, opts) })
}

func (s *Store) listOnce(ctx context.Context, opts ListOptions) (ListPage, error) {
	var mem *memIter
	var memShard string
	if opts.Source != SourceBase {
		// Before the manifests, as in getOnce.
		if w := s.readWriter(); w != nil {
			mem, memShard = w.memIterAfter(opts.After), w.shard
		}
	}
	// A List of the base alone unions no pending generation, so the read caps do not refuse it.
	snap, err := s.snapshot(ctx, opts.Source != SourceBase)
	if err != nil {
		return ListPage{}, err
	}
	srcs := s.sources(snap, opts.Source, func(lo, hi string) bool { return opts.After == "" || hi > opts.After })
	if len(srcs) > readFanIn {
		return s.listBounded(ctx, srcs, mem, memShard, opts)
	}
	g, err := s.openGroup(ctx, srcs, opts.After)
	if err != nil {
		return ListPage{}, err
	}
	defer g.release()
	cursors := g.cursors(opts.After)
	if mem.peek() != nil {
		cursors = append(cursors, &cursor{mem: mem, memShard: memShard})
	}
	it := newMergeIter(cursors)
	page := ListPage{Rows: []map[string]any{}}
	var size int64
	for h, ok := it.next(); ok; h, ok = it.next() {
		best := h.version()
		if best.deleted {
			continue
		}
		// A copy: the group's buffers and a streamed batch are released before the page is.
		page.Rows = append(page.Rows, cloneRow(s.toJSON(best)))
		size += s.jsonBytes(best)
		if len(page.Rows) == opts.Limit || pageFull(size, opts.MaxBytes) {
			if it.more() {
				page.Next = strings.Clone(best.key)
			}
			break
		}
	}
	if err := g.err(); err != nil {
		return ListPage{}, err
	}
	return page, nil
}

// pageFull reports whether rows of size bytes of JSON text fill a page bounded by maxBytes
// (<= 0 = no bound).
func pageFull(size, maxBytes int64) bool {
	return maxBytes > 0 && size >= maxBytes
}

// OwnPending is the number of generations this process's shard lists (no I/O).
func (s *Store) OwnPending() int {
	if w := s.residentWriter(); w != nil {
		return w.pendingGenerations()
	}
	return 0
}
