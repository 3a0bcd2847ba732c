package store

import (
	"container/heap"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// planMerge picks what one merge pass folds: the oldest pending generations, at most
// maxGens (0 = no cap), stopping after the generation whose bytes reach maxBytes (0 = no
// cap). The first generation is always taken whole, so an oversized generation still makes
// progress; a generation is never split. pending must be ascending. Pure: no I/O.
func planMerge(pending []genMeta, maxGens int, maxBytes int64) []genMeta {
	var out []genMeta
	var bytes int64
	for _, g := range pending {
		if maxGens > 0 && len(out) >= maxGens {
			break
		}
		out = append(out, g)
		bytes += g.Bytes
		if maxBytes > 0 && bytes >= maxBytes {
			break
		}
	}
	return out
}

func (s *Store) mergeCaps(p PrepareParams) (int, int64) {
	gens, bytes := s.db.opts.MergeMaxGenerations, s.db.opts.MergeMaxBytes
	if p.MaxGenerations != nil {
		gens = *p.MaxGenerations
	}
	if p.MaxBytes != nil {
		bytes = *p.MaxBytes
	}
	return max(gens, 0), max(bytes, 0)
}

func hashKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:24]
}

func randomKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "local-" + hex.EncodeToString(b[:])
}

func (s *Store) observePhase(phase string, start time.Time) {
	if m := s.db.opts.Metrics; m != nil {
		m.MergePhaseSeconds.WithLabelValues(phase).Observe(time.Since(start).Seconds())
	}
}

func (s *Store) countMerge(result string, reclaimed int) {
	if m := s.db.opts.Metrics; m != nil {
		m.MergeTotal.WithLabelValues(string(s.target.Kind), result).Inc()
		if reclaimed > 0 {
			m.GenerationsReclaimed.WithLabelValues(string(s.target.Kind)).Add(float64(reclaimed))
		}
	}
}

// Prepare reads the oldest pending generations of a shard, keeps the newest row per key,
// and writes the result as a staged Parquet run that no manifest references yet. It holds
// the merge lock shared, so appends, reads and other prepares go on; a commit waits.
// It returns nil when the shard has nothing pending.
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) Prepare(ctx context.Context, p PrepareParams) (*PreparedMerge, error) {
	shard := p.Shard
	if shard == "" {
		shard = s.db.shard
	}
	if err := validateShardID(shard); err != nil {
		return nil, err
	}
	attempt := p.AttemptKey
	if attempt == "" {
		attempt = randomKey()
	}
	maxGens, maxBytes := s.mergeCaps(p)

	s.mergeLock.RLock()
	defer s.mergeLock.RUnlock()

	sm, err := s.loadShard(ctx, shard)
	if err != nil || sm == nil {
		return nil, err
	}
	base, err := s.loadBase(ctx)
	if err != nil {
		return nil, err
	}
	wm := base.Watermarks[shard]
	if err := s.reconcile(ctx, shard, sm, wm); err != nil {
		return nil, err
	}
	// A retried attempt may have staged other generations before it failed (docs/DESIGN.md §3:
	// a retried prepare must not leak): delete every unreferenced file of this attempt.
	attemptPrefix := strings.TrimSuffix(dataKey(s.target, fmt.Sprintf("m-%s-", hashKey(attempt, s.target.String(), shard))), ".parquet")
	if objs, err := s.db.bucket.List(ctx, attemptPrefix); err != nil {
		return nil, err
	} else {
		for _, o := range objs {
			if !base.references(o.Key) {
				if err := s.db.bucket.Delete(ctx, o.Key); err != nil {
					return nil, err
				}
			}
		}
	}
	plan := planMerge(sm.pendingAbove(wm), maxGens, maxBytes)
	if len(plan) == 0 {
		return nil, nil
	}

	// Reserve the whole initial allowance before reading anything: nobody waits while
	// holding part of what they need, so merges cannot deadlock on the budget. The allowance
	// is the footprint of a merge of merge_max_bytes, not just its input (mergeFootprint).
	budget := s.db.opts.Budget
	want := int64(0)
	if maxBytes > 0 {
		want = mergeFootprint(maxBytes)
	}
	if lim := budget.Limit(); lim > 0 && (want == 0 || want > lim) {
		want = lim
	}
	res, wait, err := budget.Reserve(ctx, want)
	if m := s.db.opts.Metrics; m != nil {
		m.BudgetWaitSeconds.Observe(wait.Seconds())
	}
	if err != nil {
		return nil, err
	}
	defer res.Release()

	// Grow to the plan's footprint from the manifest's sizes before reading, so the reads
	// can run concurrently without any of them running ahead of the budget. Growth never
	// waits: on refusal, merge the complete prefix that fits; with no prefix, give up this
	// attempt (it is retried) rather than hold memory while waiting.
	var planned int64
	for i, g := range plan {
		if !res.TryGrow(mergeFootprint(planned + g.Bytes)) {
			if i == 0 {
				return nil, fmt.Errorf("%s shard %s: %w while reading the first generation", s.target, shard, ErrBudgetBusy)
			}
			plan = plan[:i]
			break
		}
		planned += g.Bytes
	}

	readStart := time.Now()
	files, owned, err := s.readGensForMerge(ctx, shard, plan, p.Progress)
	defer func() {
		for i, f := range files {
			if f != nil && owned[i] {
				f.rec.Release()
			}
		}
	}()
	if err != nil {
		return nil, err
	}
	// The decoded sizes are what memory holds; the manifest's are what was reserved. They
	// agree to within metadata, but the budget must hold the real figure: grow to it, and on
	// refusal merge the prefix that fits, exactly as above.
	var bytes, inputRows int64
	for i, f := range files {
		if !res.TryGrow(mergeFootprint(bytes + f.bytes)) {
			if i == 0 {
				return nil, fmt.Errorf("%s shard %s: %w while reading the first generation", s.target, shard, ErrBudgetBusy)
			}
			plan = plan[:i]
			break
		}
		bytes += f.bytes
		inputRows += int64(f.n)
	}
	s.observePhase("read", readStart)

	writeStart := time.Now()
	picks := mergeSorted(files[:len(plan)], nil)
	from, through := plan[0].Gen, plan[len(plan)-1].Gen
	id := fmt.Sprintf("m-%s-%s-%d-%d", hashKey(attempt, s.target.String(), shard), shortShard(shard), from, through)
	staged := StagedFile{Path: dataKey(s.target, id), Rows: int64(len(picks))}
	if len(picks) > 0 {
		staged.MinKey, staged.MaxKey = picks[0].key(), picks[len(picks)-1].key()
		staged.MinSeq, staged.MaxSeq = picks[0].seq(), picks[0].seq()
		for _, pk := range picks {
			staged.MinSeq, staged.MaxSeq = min(staged.MinSeq, pk.seq()), max(staged.MaxSeq, pk.seq())
		}
	}
	// Build the run chunk by chunk and stream it to storage: the output never exists whole
	// in memory, neither as Arrow nor as Parquet bytes (mergeFootprint counts one chunk).
	schema := s.codec.ArrowSchema()
	chunkRows := mergeChunkRows(bytes, inputRows)
	staged.Bytes, err = s.db.bucket.PutFrom(ctx, staged.Path, func(w io.Writer) error {
		off, started := 0, false
		cw := newChecksumWriter(w) // fresh per call: the sum is of the bytes that were stored
		defer func() { staged.Checksum = cw.sum() }()
		return writeParquet(cw, schema, func() (arrow.RecordBatch, error) {
			if started && off >= len(picks) {
				return nil, nil
			}
			started = true
			end := min(off+chunkRows, len(picks))
			rec := copyRows(schema, picks[off:end])
			off = end
			return rec, nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("write staged run: %w", err)
	}
	s.observePhase("write", writeStart)
	rows := int64(len(picks))
	gens := make([]uint64, len(plan))
	for i, g := range plan {
		gens[i] = g.Gen
	}
	return &PreparedMerge{
		Target:      s.target.String(),
		Shard:       shard,
		Generations: gens,
		Through:     through,
		Staged:      []StagedFile{staged},
		WriterEpoch: sm.WriterEpoch,
		AttemptKey:  attempt,
		BaseVersion: base.Version,
		Bytes:       bytes,
		Rows:        rows,
		InputRows:   inputRows,
	}, nil
}

func shortShard(shard string) string {
	if len(shard) > 8 {
		return shard[:8]
	}
	return shard
}

func validateShardID(shard string) error {
	if shard == "" || len(shard) > 64 || strings.ContainsAny(shard, "/\\:") || strings.Contains(shard, "..") {
		return invalidf("bad shard id %q", shard)
	}
	return nil
}

// mergeReadConcurrency bounds how many generations one prepare reads at once. On object
// storage a read is a round trip, and reading them one after another made a prepare a chain
// of round trips (docs/BENCHMARKS.md, scenario 6). The budget is already held for all of
// them, so concurrency changes latency, not memory.
const mergeReadConcurrency = 8

// mergeDeleteConcurrency bounds the concurrent deletes of merged generation files.
const mergeDeleteConcurrency = 8

// mergeChunkBytes is the size of the output chunk a prepare builds at a time; each chunk
// becomes at least one row group of the staged run and is released once written.
const mergeChunkBytes = 8 << 20

// mergeOverheadFactor and mergeOverheadBytes define mergeFootprint. The input is held whole
// for the newest-per-key merge (zero-copy: the decoded generations are their object bytes);
// on top come the picks and key views (~16 B per row, up to 1/8 of the input for 128 B rows)
// and the output window: one chunk being built, the Parquet writer's page buffers and the
// write buffer. Measured in `walkeeper bench memory` (docs/BENCHMARKS.md, scenario 5).
const (
	mergeOverheadFactor = 8 // input/8 for per-row bookkeeping
	mergeOverheadBytes  = 2*mergeChunkBytes + 4<<20
)

// mergeFootprint is the memory a prepare of input bytes of generations needs at its peak:
// what it reserves from the budget, so that the budget bounds memory rather than input.
func mergeFootprint(input int64) int64 {
	if input <= 0 {
		return 0
	}
	return input + input/mergeOverheadFactor + mergeOverheadBytes
}

// mergeChunkRows is how many rows an output chunk of about mergeChunkBytes holds, from the
// input's average row size; at most a row group, at least 1024 rows.
func mergeChunkRows(inputBytes, inputRows int64) int {
	if inputRows <= 0 || inputBytes <= 0 {
		return parquetRowGroup
	}
	per := max(inputBytes/inputRows, 1)
	return int(min(max(mergeChunkBytes/per, 1024), parquetRowGroup))
}

// readGensForMerge reads and decodes plan's generations concurrently (at most
// mergeReadConcurrency at once). files[i] is plan[i]; owned[i] is true when the caller
// must release files[i].rec (it was decoded for this merge, not taken from the cache).
// Progress, if set, is called once per generation read, never concurrently. On error the
// error is that of the first failing generation in plan order, as a serial read reported
// it; files read meanwhile are returned too, so the caller releases them.
func (s *Store) readGensForMerge(ctx context.Context, shard string, plan []genMeta, progress func(done, total int)) ([]*sortedFile, []bool, error) {
	files := make([]*sortedFile, len(plan))
	owned := make([]bool, len(plan))
	errs := make([]error, len(plan))
	var mu sync.Mutex
	done := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(mergeReadConcurrency)
	for i, gm := range plan {
		g.Go(func() error {
			f, own, err := s.readGenForMerge(gctx, gm.Path, gm.Checksum)
			if err != nil {
				errs[i] = fmt.Errorf("read generation %d of shard %s: %w", gm.Gen, shard, err)
				return errs[i]
			}
			mu.Lock()
			defer mu.Unlock()
			files[i], owned[i] = f, own
			done++
			if progress != nil {
				progress(done, len(plan))
			}
			return nil
		})
	}
	werr := g.Wait()
	if werr == nil {
		return files, owned, nil
	}
	for _, err := range errs {
		// Skip the reads that failed only because another one did and cancelled them.
		if err != nil && !(ctx.Err() == nil && errors.Is(err, context.Canceled)) {
			return files, owned, err
		}
	}
	return files, owned, werr
}

// readGenForMerge uses a cached decode if a reader already paid for it, and otherwise
// decodes without caching: a merge reads each generation once, just before it dies.
// owned reports a decode made for this call, which the caller releases.
func (s *Store) readGenForMerge(ctx context.Context, p, checksum string) (_ *sortedFile, owned bool, _ error) {
	s.db.cache.mu.Lock()
	el, ok := s.db.cache.byKey[p]
	s.db.cache.mu.Unlock()
	if ok {
		return el.Value.(*sortedFile), false, nil
	}
	data, err := s.db.bucket.Get(ctx, p)
	if err != nil {
		return nil, false, err
	}
	if err := verifyChecksum(data, checksum, "generation "+p); err != nil {
		s.countCorrupt(err)
		return nil, false, err
	}
	recs, err := decodeIPC(data, s.codec, "generation "+p)
	if err == nil && len(recs) != 1 {
		releaseAll(recs)
		err = corruptf("generation %s has %d records, want 1", p, len(recs))
	}
	if err != nil {
		s.countCorrupt(err)
		return nil, false, err
	}
	f, err := s.newSortedFile(p, recs[0])
	if err != nil {
		recs[0].Release()
		return nil, false, err
	}
	return f, true, nil
}

// reconcile repairs a crash between a base commit and its drain: generations at or below
// the watermark are already in the base, so they are drained and their files deleted.
func (s *Store) reconcile(ctx context.Context, shard string, sm *shardManifest, wm uint64) error {
	var covered []uint64
	for _, g := range sm.Flushed {
		if g.Gen <= wm {
			covered = append(covered, g.Gen)
		}
	}
	// Stale and orphan demand records of the shard go too (best effort: they cost at most a
	// needless MergeWal start, and reconcile retries).
	_, _ = s.cleanDemand(ctx, shard, sm, wm, false)
	if len(covered) == 0 {
		return nil
	}
	if _, err := s.drain(ctx, shard, covered); err != nil {
		return err
	}
	_, err := s.deleteMergedGenerations(ctx, shard, wm)
	return err
}

// pick is one surviving row version chosen by mergeSorted.
type pick struct {
	f *sortedFile
	i int
}

func (p pick) key() string { return p.f.view.Key(p.i) }
func (p pick) seq() int64  { return p.f.view.Seq(p.i) }

type mergeHeap []*cursor

func (h mergeHeap) Len() int           { return len(h) }
func (h mergeHeap) Less(i, j int) bool { return h[i].key() < h[j].key() }
func (h mergeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)        { *h = append(*h, x.(*cursor)) }
func (h *mergeHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// mergeSorted walks sorted, key-unique files as one stream and keeps, per key, the newest
// version (write sequence, then shard id). drop, if set, discards a surviving version
// (compaction uses it to drop tombstones). The result is in key order.
func mergeSorted(files []*sortedFile, drop func(f *sortedFile, i int) bool) []pick {
	h := &mergeHeap{}
	total := 0
	for _, f := range files {
		if f.n > 0 {
			*h = append(*h, &cursor{file: f})
			total += f.n
		}
	}
	heap.Init(h)
	out := make([]pick, 0, total)
	for h.Len() > 0 {
		key := (*h)[0].key()
		var best pick
		found := false
		for h.Len() > 0 && (*h)[0].key() == key {
			c := (*h)[0]
			cand := pick{c.file, c.i}
			if !found || newer(c.file.view.Seq(c.i), c.file.view.Shard(c.i), best.seq(), best.f.view.Shard(best.i)) {
				best, found = cand, true
			}
			c.i++
			if c.done() {
				heap.Pop(h)
			} else {
				heap.Fix(h, 0)
			}
		}
		if drop != nil && drop(best.f, best.i) {
			continue
		}
		out = append(out, best)
	}
	return out
}

// copyRows builds one record from picked rows, column by column. Variable-width columns
// reserve their value bytes up front: Reserve counts rows only, and letting the value buffer
// double its way up allocated about twice the output (issue 4).
func copyRows(schema *arrow.Schema, picks []pick) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for c := 0; c < schema.NumFields(); c++ {
		fb := b.Field(c)
		fb.Reserve(len(picks))
		switch bb := fb.(type) {
		case *array.StringBuilder:
			n := 0
			for _, p := range picks {
				n += p.f.rec.Column(c).(*array.String).ValueLen(p.i)
			}
			bb.ReserveData(n)
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.String)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		case *array.Int64Builder:
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.Int64)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		case *array.Float64Builder:
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.Float64)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		case *array.BooleanBuilder:
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.Boolean)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		case *array.BinaryBuilder:
			n := 0
			for _, p := range picks {
				n += p.f.rec.Column(c).(*array.Binary).ValueLen(p.i)
			}
			bb.ReserveData(n)
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.Binary)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		case *array.TimestampBuilder:
			for _, p := range picks {
				a := p.f.rec.Column(c).(*array.Timestamp)
				if a.IsNull(p.i) {
					bb.AppendNull()
				} else {
					bb.Append(a.Value(p.i))
				}
			}
		default:
			panic(fmt.Sprintf("copyRows: unsupported builder %T", fb)) // schemas only hold the six types
		}
	}
	return b.NewRecordBatch()
}

func (s *Store) validatePrepared(p *PreparedMerge) error {
	if p == nil {
		return invalidf("nil prepared merge")
	}
	if p.Target != s.target.String() {
		return invalidf("prepared merge is for %s, not %s", p.Target, s.target)
	}
	if err := validateShardID(p.Shard); err != nil {
		return err
	}
	if len(p.Generations) == 0 || p.Generations[len(p.Generations)-1] != p.Through {
		return invalidf("prepared merge lists no generations or a wrong through")
	}
	for i := 1; i < len(p.Generations); i++ {
		if p.Generations[i] <= p.Generations[i-1] {
			return invalidf("prepared generations are not ascending")
		}
	}
	if p.AttemptKey == "" || len(p.Staged) == 0 {
		return invalidf("prepared merge has no attempt key or no staged files")
	}
	prefix := path.Join(storePrefix(s.target), dataDir) + "/"
	for _, f := range p.Staged {
		if !strings.HasPrefix(f.Path, prefix) || strings.Contains(f.Path, "..") || !strings.HasSuffix(f.Path, ".parquet") {
			return invalidf("staged file %q is outside %s", f.Path, prefix)
		}
	}
	return nil
}

func (s *Store) claimKey(p *PreparedMerge) string {
	return attemptKey(s.target, p.Shard, hashKey(p.AttemptKey, fmt.Sprint(p.Through)))
}

// claim records state ("commit" or "abort") for the attempt. It returns the state that
// holds afterwards: ours, or the one another caller claimed first.
func (s *Store) claim(ctx context.Context, p *PreparedMerge, state string) (string, error) {
	raw, _ := json.Marshal(attemptClaim{State: state, AttemptKey: p.AttemptKey, Through: p.Through, At: s.db.opts.Now().UTC()})
	err := s.db.bucket.PutIfAbsent(ctx, s.claimKey(p), raw)
	if err == nil {
		return state, nil
	}
	if !errors.Is(err, ErrAlreadyExists) {
		return "", err
	}
	got, err := s.db.bucket.Get(ctx, s.claimKey(p))
	if err != nil {
		return "", err
	}
	var c attemptClaim
	if err := decodeJSONObject(got, &c, "attempt claim"); err != nil {
		return "", err
	}
	return c.State, nil
}

// Commit publishes a prepared merge: base version v+1 = runs + staged files with the
// shard's watermark set to Through. It holds the merge lock exclusively only around the
// conditional write of the next base manifest; the manifest read and checks run before it
// and the drain and deletes after it.
// Committing twice is safe: a watermark already at Through means "done".
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) Commit(ctx context.Context, p *PreparedMerge) (CommitResult, error) {
	if err := s.validatePrepared(p); err != nil {
		return CommitResult{}, err
	}
	state, err := s.claim(ctx, p, "commit")
	if err != nil {
		return CommitResult{}, err
	}
	if state != "commit" {
		s.countMerge("aborted", 0)
		return CommitResult{}, fmt.Errorf("attempt %s was aborted: %w", p.AttemptKey, ErrStalePreparation)
	}
	commitStart := time.Now()
	res, err := s.publishMerge(ctx, p)
	s.observePhase("commit", commitStart)
	if err != nil {
		if errors.Is(err, ErrStalePreparation) {
			s.countMerge("stale", 0)
		} else {
			s.countMerge("failed", 0)
		}
		return res, err
	}

	drainStart := time.Now()
	reclaimed, err := s.drain(ctx, p.Shard, p.Generations)
	s.observePhase("drain", drainStart)
	if err != nil {
		// The base already holds the rows; the next prepare reconciles the drain.
		s.countMerge("failed", 0)
		return res, fmt.Errorf("committed base version %d but drain failed: %w", res.BaseVersion, err)
	}
	res.Reclaimed = reclaimed
	deleteStart := time.Now()
	res.Deleted, _ = s.deleteMergedGenerations(ctx, p.Shard, p.Through)
	s.afterMergeDemand(ctx, p.Shard, p.Through, res.Runs)
	s.observePhase("delete", deleteStart)
	if res.AlreadyCommitted {
		if err := s.dropUnreferencedStaged(ctx, p); err != nil {
			return res, err
		}
		s.countMerge("already_committed", reclaimed)
	} else {
		s.countMerge("merged", reclaimed)
	}
	// The claim is garbage now that the watermark covers the attempt (a late Commit answers
	// "already committed", a late Abort finds the commit). A failed delete is returned so the
	// caller's retry, which takes the already-committed path, deletes it.
	if err := s.dropClaim(ctx, p); err != nil {
		return res, fmt.Errorf("committed base version %d but claim clean-up failed: %w", res.BaseVersion, err)
	}
	s.db.log.Info("merge committed", zap.String("target", s.target.String()), zap.String("shard", p.Shard),
		zap.Uint64("through", p.Through), zap.Int("reclaimed", reclaimed), zap.Uint64("base_version", res.BaseVersion),
		zap.Bool("already_committed", res.AlreadyCommitted), zap.Duration("lock_hold", res.LockHold))
	return res, nil
}

// publishMerge is the metadata step of Commit: read, check, and publish v+1 under the lock.
func (s *Store) publishMerge(ctx context.Context, p *PreparedMerge) (CommitResult, error) {
	for _, f := range p.Staged {
		ok, err := s.db.bucket.Exists(ctx, f.Path)
		if err != nil {
			return CommitResult{}, err
		}
		if !ok {
			base, err := s.loadBase(ctx)
			if err == nil && base.Watermarks[p.Shard] >= p.Through {
				break // committed earlier and the run was compacted away since
			}
			return CommitResult{}, fmt.Errorf("staged file %s is missing: %w", f.Path, ErrStalePreparation)
		}
	}
	// The manifest read, the checks and the next version are built outside the lock: the
	// put-if-absent of version v+1 is what arbitrates between committers (other processes
	// never see this lock anyway), and a committer that lost the race rebases. The lock
	// covers only the conditional write, so a prepare of this process never plans
	// generations while their commit is being published, and the hold is one write, not
	// the round trips of the manifest read.
	var res CommitResult
	for attempt := 0; attempt < 128; attempt++ {
		base, err := s.loadBase(ctx)
		if err != nil {
			return res, err
		}
		wm := base.Watermarks[p.Shard]
		if wm >= p.Through {
			res.BaseVersion, res.AlreadyCommitted = base.Version, true
			return res, nil
		}
		if wm >= p.Generations[0] {
			return res, fmt.Errorf("%s shard %s: watermark %d inside prepared range %d..%d: %w",
				s.target, p.Shard, wm, p.Generations[0], p.Through, ErrStalePreparation)
		}
		next := base.clone()
		next.Version = base.Version + 1
		next.Reason = "merge"
		for _, f := range p.Staged {
			next.Runs = append(next.Runs, runMeta{
				ID: strings.TrimSuffix(path.Base(f.Path), ".parquet"), Path: f.Path, Rows: f.Rows, Bytes: f.Bytes,
				MinKey: f.MinKey, MaxKey: f.MaxKey, MinSeq: f.MinSeq, MaxSeq: f.MaxSeq,
				Checksum: f.Checksum,
				Source:   fmt.Sprintf("merge:%s:%d-%d", p.Shard, p.Generations[0], p.Through),
			})
		}
		next.Watermarks[p.Shard] = p.Through
		hold, err := s.publishBaseLocked(ctx, next)
		res.LockHold += hold
		if err == nil {
			res.BaseVersion, res.Runs = next.Version, len(next.Runs)
			s.observeLock(res.LockHold)
			return res, nil
		}
		if !errors.Is(err, ErrAlreadyExists) {
			return res, err
		}
		// Another committer (another shard, another process) won v+1: merges only append
		// runs, so rebase onto the new version and try again.
		backoff(ctx, attempt)
	}
	return res, fmt.Errorf("%s: base commit kept losing races: %w", s.target, ErrConflict)
}

// publishBaseLocked publishes next with put-if-absent while holding the merge lock
// exclusively, and returns how long the lock was held.
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) publishBaseLocked(ctx context.Context, next *baseManifest) (time.Duration, error) {
	raw, err := s.encodeBase(next)
	if err != nil {
		return 0, err
	}
	s.mergeLock.Lock()
	defer s.mergeLock.Unlock()
	locked := time.Now()
	err = s.publishEncodedBase(ctx, next.Version, raw)
	return time.Since(locked), err
}

func (s *Store) observeLock(d time.Duration) {
	if m := s.db.opts.Metrics; m != nil {
		m.CommitLockSeconds.Observe(d.Seconds())
	}
}

// drain removes exactly gens from the shard manifest: a relative edit re-applied on every
// lost race, never "set the list to empty", so a seal that lands meanwhile is kept.
func (s *Store) drain(ctx context.Context, shard string, gens []uint64) (int, error) {
	drop := make(map[uint64]bool, len(gens))
	for _, g := range gens {
		drop[g] = true
	}
	removed := 0
	m, err := s.editShard(ctx, shard, func(m *shardManifest) (bool, error) {
		keep := m.Flushed[:0:0]
		for _, g := range m.Flushed {
			if !drop[g.Gen] {
				keep = append(keep, g)
			}
		}
		removed = len(m.Flushed) - len(keep)
		m.Flushed = keep
		return removed > 0, nil
	})
	if err != nil {
		return 0, err
	}
	if w := s.residentWriter(); w != nil && w.shard == shard {
		w.observe(m)
	}
	return removed, nil
}

// deleteMergedGenerations deletes generation files at or below through that the latest
// shard manifest no longer lists. Called only after the drain, so no reader can be
// directed to them any more: readers skip generations at or below the watermark.
func (s *Store) deleteMergedGenerations(ctx context.Context, shard string, through uint64) (int, error) {
	m, err := s.loadShard(ctx, shard)
	if err != nil || m == nil {
		return 0, err
	}
	listed := map[string]bool{}
	for _, g := range m.Flushed {
		listed[g.Path] = true
	}
	for _, q := range m.Quarantined {
		listed[q.Path] = true // set aside for repair: never garbage
	}
	objs, err := s.db.bucket.List(ctx, genPrefix(s.target, shard))
	if err != nil {
		return 0, err
	}
	// Delete concurrently: on object storage each delete is a round trip, and a pass
	// merges up to merge_max_generations files. The first error is returned with the count
	// of files actually deleted; the rest are left for the next pass, as before.
	var n atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(mergeDeleteConcurrency)
	for _, o := range objs {
		gen, ok := parseGenNumber(o.Key)
		if !ok || gen > through || listed[o.Key] {
			continue
		}
		g.Go(func() error {
			if err := s.db.bucket.Delete(gctx, o.Key); err != nil {
				return err
			}
			s.db.cache.forget(o.Key)
			n.Add(1)
			return nil
		})
	}
	err = g.Wait()
	return int(n.Load()), err
}

func parseGenNumber(key string) (uint64, bool) {
	base := path.Base(key)
	i := strings.IndexByte(base, '-')
	if i <= 0 || !strings.HasSuffix(base, ".arrow") {
		return 0, false
	}
	var g uint64
	if _, err := fmt.Sscanf(base[:i], "%d", &g); err != nil {
		return 0, false
	}
	return g, true
}

// dropUnreferencedStaged deletes an attempt's staged files when the latest base does not
// reference them (another attempt committed the same generations first).
func (s *Store) dropUnreferencedStaged(ctx context.Context, p *PreparedMerge) error {
	base, err := s.loadBase(ctx)
	if err != nil {
		return err
	}
	for _, f := range p.Staged {
		if !base.references(f.Path) {
			if err := s.db.bucket.Delete(ctx, f.Path); err != nil {
				return err
			}
		}
	}
	return nil
}

func (m *baseManifest) references(p string) bool {
	for _, r := range m.Runs {
		if r.Path == p {
			return true
		}
	}
	return false
}

// Abort deletes exactly the staged files of an attempt whose commit is proven absent. The
// abort claim makes the proof stick: a late commit of the same attempt sees it and
// refuses, so files are never deleted under a manifest that references them.
func (s *Store) Abort(ctx context.Context, p *PreparedMerge) (AbortResult, error) {
	if err := s.validatePrepared(p); err != nil {
		return AbortResult{}, err
	}
	state, err := s.claim(ctx, p, "abort")
	if err != nil {
		return AbortResult{}, err
	}
	base, err := s.loadBase(ctx)
	if err != nil {
		return AbortResult{}, err
	}
	for _, f := range p.Staged {
		if base.references(f.Path) {
			// Published, so no claim is needed any more: see dropClaim.
			return AbortResult{CommitPresent: true}, s.dropClaim(ctx, p)
		}
	}
	wm := base.Watermarks[p.Shard]
	// Once the watermark reaches into the prepared range, no commit of this attempt can
	// ever publish (Commit answers "already committed" or StalePreparation), so its files
	// are garbage whatever the claim says. Below the range, only an abort claim proves it.
	if wm < p.Generations[0] && state == "commit" {
		return AbortResult{}, fmt.Errorf("attempt %s has started committing; not deleting its files: %w", p.AttemptKey, ErrConflict)
	}
	res := AbortResult{CommitPresent: wm >= p.Through}
	for _, f := range p.Staged {
		if err := s.db.bucket.Delete(ctx, f.Path); err != nil {
			return res, err
		}
		res.Deleted++
	}
	s.countMerge("aborted", 0)
	if wm >= p.Generations[0] {
		// The abort claim only has to stop a late commit, and none can publish any more.
		return res, s.dropClaim(ctx, p)
	}
	return res, nil
}

// dropClaim deletes the attempt's claim once the shard's watermark has reached the
// attempt's first generation: from then on every Commit of the attempt answers "already
// committed" or StalePreparation from the watermark alone and no Abort can delete a file a
// manifest references, so the claim protects nothing. Claims of attempts aborted below the
// watermark stay: they are what stops a late commit.
func (s *Store) dropClaim(ctx context.Context, p *PreparedMerge) error {
	if err := s.db.bucket.Delete(ctx, s.claimKey(p)); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// MergeOnce prepares and commits one pass of shard ("" = own shard) in this process.
// It returns a zero result when nothing is pending.
func (s *Store) MergeOnce(ctx context.Context, shard string) (CommitResult, error) {
	p, err := s.Prepare(ctx, PrepareParams{Shard: shard})
	if err != nil || p == nil {
		return CommitResult{}, err
	}
	res, err := s.Commit(ctx, p)
	if errors.Is(err, ErrStalePreparation) {
		_, _ = s.Abort(ctx, p)
	}
	return res, err
}

// MergeAll merges every pending generation of every shard, pass by pass, one commit at a
// time. It returns the number of generations reclaimed.
func (s *Store) MergeAll(ctx context.Context) (int, error) {
	total := 0
	for {
		shards, err := s.PendingShards(ctx)
		if err != nil {
			return total, err
		}
		if len(shards) == 0 {
			return total, nil
		}
		progress := false
		for _, sh := range shards {
			res, err := s.MergeOnce(ctx, sh.Shard)
			if err != nil {
				return total, err
			}
			total += res.Reclaimed
			progress = progress || res.Reclaimed > 0
		}
		if !progress {
			return total, nil
		}
	}
}
