package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// The prepare phase of a merge: plan (merge_plan.go), read the planned generations, keep the
// newest row per key (merge_iter.go) and stage the result as a Parquet run no manifest
// references yet (merge_gather.go). It holds mergeLock shared, so appends, reads and other
// prepares go on; only this process's swap of its cached base waits.

// mergeReadConcurrency bounds how many generations one prepare reads at once; the budget is
// already held for all of them, so it changes latency, not memory.
const mergeReadConcurrency = 8

// reserveMerge takes want bytes of the merge budget, the one wait of a merge or compaction,
// and records how long it waited.
func (s *Store) reserveMerge(ctx context.Context, want int64) (*Reservation, error) {
	res, wait, err := s.db.opts.Budget.Reserve(ctx, want)
	s.db.metrics.BudgetWaitSeconds.Observe(wait.Seconds())
	return res, err
}

// Prepare reads the oldest pending generations of a shard, keeps the newest row per key, and
// writes the result as a staged Parquet run no manifest references yet (nil when nothing is
// pending). It repairs nothing: callers run Repair first.
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) Prepare(ctx context.Context, p PrepareParams) (*PreparedMerge, error) {
	shard, err := s.mergeShard(p.Shard)
	if err != nil {
		return nil, err
	}
	attempt := attemptKey(p.AttemptKey)
	caps := mergeCaps{ // the store's defaults unless p overrides them
		maxGens:  max(*cmp.Or(p.MaxGenerations, &s.db.opts.MergeMaxGenerations), 0),
		maxBytes: max(*cmp.Or(p.MaxBytes, &s.db.opts.MergeMaxBytes), 0),
	}

	// Planned under the shared lock, so this process's cached base does not advance
	// meanwhile; a version published durably meanwhile is caught by the commit's watermark
	// check, as one from another process is (docs/FORMAT.md, "Commit lock").
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
	pending := sm.PendingAbove(wm)
	if len(pending) == 0 {
		return nil, s.dropLeakedStaged(ctx, base, attempt, shard, "", 0)
	}

	budget := s.db.opts.Budget
	res, err := s.reserveMerge(ctx, mergeReservation(caps.maxBytes, budget.Limit()))
	if err != nil {
		return nil, err
	}
	defer res.Release()

	plan, err := planMerge(pending, caps, res.TryGrow)
	if err != nil {
		return nil, fmt.Errorf("%s shard %s: %w", s.target, shard, err)
	}

	// Every buffer of the merge is charged to acct, against res: the reservation is a
	// bound on what the merge allocates, not only on what it planned (alloc.go).
	acct := newMemAccount(res, budget)
	readStart := time.Now()
	files, frees, err := s.readGensForMerge(ctx, acct, shard, plan.gens, p.Progress)
	defer func() { releaseMergeInputs(files, frees, 0) }()
	if err != nil {
		return nil, s.mergedMeanwhile(ctx, shard, wm, err)
	}
	decoded := make([]int64, len(files))
	for i, f := range files {
		decoded[i] = f.bytes
	}
	if err := plan.refit(decoded, res.TryGrow); err != nil {
		return nil, fmt.Errorf("%s shard %s: %w", s.target, shard, err)
	}
	releaseMergeInputs(files, frees, len(plan.gens))
	files = files[:len(plan.gens)]
	var inputRows int64
	for _, f := range files {
		inputRows += int64(f.n)
	}
	s.observePhase("read", readStart)

	writeStart := time.Now()
	picks := mergeSorted(files)
	// The picks live on the Go heap (they point at files); charge them all the same.
	pickBytes := int64(cap(picks)) * int64(unsafe.Sizeof(pick{}))
	if !acct.tryCharge(pickBytes) {
		return nil, fmt.Errorf("%s shard %s: merge of %d rows: %w", s.target, shard, len(picks), ErrBudgetBusy)
	}
	defer acct.uncharge(pickBytes)
	id := stagedRunID(stagedRunPrefix(attempt, s.target, shard), shard, plan.from(), plan.through())
	staged, err := s.writeStagedRun(ctx, acct, dataKey(s.target, id), picks, mergeChunkRows(plan.bytes, inputRows))
	if err != nil {
		return nil, err
	}
	// After planning, so that the earlier tries' files of this plan's range, whose claim is
	// this attempt's next commit's, are left alone.
	if err := s.dropLeakedStaged(ctx, base, attempt, shard, staged.Path, plan.through()); err != nil {
		return nil, err
	}
	s.observePhase("write", writeStart)
	return &PreparedMerge{
		Target:      s.target.String(),
		Shard:       shard,
		Generations: plan.generations(),
		Through:     plan.through(),
		Staged:      []StagedFile{staged},
		WriterEpoch: sm.WriterEpoch,
		AttemptKey:  attempt,
		BaseVersion: base.Version,
		Bytes:       plan.bytes,
		Rows:        int64(len(picks)),
		InputRows:   inputRows,
	}, nil
}

// stagedRunPrefix is the part of an attempt's staged run ids that names the attempt, the
// store and the shard: "m-<hash>-". A retried attempt finds its earlier files by it.
func stagedRunPrefix(attempt string, t Target, shard string) string {
	return fmt.Sprintf("%s%s-", stagedRunNamePrefix, hashKey(attempt, t.String(), shard))
}

// stagedRunNamePrefix starts the name of every run a merge stages (and of every merged run
// in the base: a commit publishes the staged file as it is).
const stagedRunNamePrefix = "m-"

// stagedRunID is the id of the run an attempt stages for generations from..through.
func stagedRunID(prefix, shard string, from, through uint64) string {
	return fmt.Sprintf("%s%s-%d-%d", prefix, runIDShardTag(shard), from, through)
}

// runIDShardTag is the shard's first 8 characters, enough for a human reading a listing (the
// attempt hash already makes the id unique).
func runIDShardTag(shard string) string { return shard[:min(len(shard), 8)] }

// dropLeakedStaged deletes every file an earlier try of this attempt staged that no commit of
// it can publish any more, since a retried prepare must not leak (docs/DESIGN.md §3); keep
// and through name this try's file and range end, whose claim is this try's commit's. A file
// whose range is open is deleted only after claiming "abort" for it and reading a base that
// does not keep it, as Abort does: a reset run's old commit may still publish it.
//
// INVARIANT: only files that no base references and no commit can publish are deleted.
func (s *Store) dropLeakedStaged(ctx context.Context, base *manifest.Base, attempt, shard, keep string, through uint64) error {
	prefix := dataPrefix(s.target) + stagedRunPrefix(attempt, s.target, shard)
	objs, err := s.db.bucket.List(ctx, prefix)
	if err != nil {
		return err
	}
	for _, o := range objs {
		// prefix names the attempt and the shard: a key under it that does not parse, or whose
		// tag is another shard's, walkeeper did not write.
		tag, from, to, ok := parseStagedRunKey(s.target, o.Key)
		if !ok || tag != runIDShardTag(shard) {
			s.db.foreignObject(foreignStaging, o.Key) // never deleted: not ours to delete
			continue
		}
		if o.Key == keep || baseKeeps(base, o.Key) {
			continue
		}
		if manifest.WatermarkCoverage(base.Watermarks[shard], from, to) == manifest.RangeOpen {
			if to == through {
				continue // an "abort" claim would stop this try's own commit
			}
			state, err := s.claimAttempt(ctx, attempt, shard, to, "abort")
			if err != nil {
				return err
			}
			if state == "commit" {
				// Its commit may publish it any moment; once the watermark reaches into its
				// range, the round commit that moved it collects it if it never was.
				continue
			}
			fresh, err := s.loadBase(ctx)
			if err != nil {
				return err
			}
			if baseKeeps(fresh, o.Key) {
				continue // published before the abort claim, and its commit's claim dropped
			}
		}
		if err := s.db.bucket.Delete(ctx, o.Key); err != nil {
			return err
		}
	}
	return nil
}

// writeStagedRun builds the run chunk by chunk and streams it to storage at key, so the
// output never exists whole in memory; its buffers come from acct (ErrBudgetBusy past it), and
// the keys it returns are copies because the picks alias input bytes, which go back to the
// budget's pool after the merge.
func (s *Store) writeStagedRun(ctx context.Context, acct *memAccount, key string, picks []pick, chunkRows int) (StagedFile, error) {
	var st manifest.Run
	for _, pk := range picks {
		addRunRow(&st, pk.f, pk.i)
	}
	staged := StagedFile{Path: key, Rows: st.Rows, MinKey: st.MinKey, MinSeq: st.MinSeq,
		MaxSeq: st.MaxSeq, Deletes: st.Deletes}
	if len(picks) > 0 {
		staged.MaxKey = strings.Clone(picks[len(picks)-1].key())
	}
	schema := s.codec.ArrowSchema()
	varCols := varWidthColumns(schema)
	var err error
	staged.Bytes, err = s.db.bucket.PutFrom(ctx, staged.Path, func(w io.Writer) error {
		off, started := 0, false
		cw, sum := newChecksumWriter(w) // fresh per call: the sum is of the bytes that were stored
		defer func() { staged.Checksum = sum() }()
		// The checksum and the storage writes run behind the encoder, on another core.
		wb := newWriteBehind(s.db, acct, cw)
		err := writeParquetWith(acct, wb, schema, func() (arrow.RecordBatch, error) {
			if err := acct.err(); err != nil {
				return nil, err
			}
			if started && off >= len(picks) {
				return nil, nil
			}
			started = true
			end := chunkEnd(picks, off, chunkRows, mergeChunkBytes, varCols)
			rec := gatherRows(acct, schema, picks[off:end])
			off = end
			return rec, nil
		})
		if cerr := wb.close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return StagedFile{}, fmt.Errorf("write staged run: %w", err)
	}
	return staged, nil
}

// readGensForMerge reads and decodes gens concurrently into buffers of acct; files[i] is
// gens[i], and a non-nil frees[i] is called after releasing files[i].rec. When acct cannot
// hold a generation, files is cut to the prefix before it (errFirstOverBudget if that is
// empty); on another error it is that of the first failing generation in plan order, with
// the files read meanwhile returned for release.
func (s *Store) readGensForMerge(ctx context.Context, acct *memAccount, shard string, gens []manifest.Gen, progress func(done, total int)) ([]*sortedFile, []func(), error) {
	files := make([]*sortedFile, len(gens))
	frees := make([]func(), len(gens))
	errs := make([]error, len(gens))
	var cut atomic.Int64 // the first generation acct refused; len(gens) while none was
	cut.Store(int64(len(gens)))
	// Charged in plan order before the reads start, so that the prefix the account holds does
	// not depend on which read gets there first.
	prepaid := make([]int64, len(gens))
	for i, gm := range gens {
		if s.db.cache.peek(gm.Path) != nil {
			continue
		}
		n, ok := acct.prepay(gm.Bytes)
		if !ok {
			cut.Store(int64(i))
			break
		}
		prepaid[i] = n
	}
	defer func() {
		for i := range gens {
			if prepaid[i] > 0 {
				acct.uncharge(prepaid[i]) // a generation not read (past the cut or cancelled)
			}
		}
	}()
	var mu sync.Mutex
	done := 0
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(mergeReadConcurrency)
	for i, gm := range gens {
		if int64(i) >= cut.Load() {
			break // past a generation the account could not hold: not part of the prefix
		}
		pre := prepaid[i]
		prepaid[i] = 0 // the read's buffer takes it over, or its free credits it
		g.Go(s.db.guard("generation read", func() error {
			if int64(i) > cut.Load() {
				acct.uncharge(pre)
				return nil // past a refused generation: not part of the prefix
			}
			f, free, err := s.readGenForMerge(gctx, acct, gm.Path, gm.Checksum, gm.Bytes, pre)
			if errors.Is(err, errBufferRefused) {
				for c := cut.Load(); int64(i) < c && !cut.CompareAndSwap(c, int64(i)); c = cut.Load() {
				}
				return nil
			}
			if err != nil {
				errs[i] = fmt.Errorf("read generation %d of shard %s: %w", gm.Gen, shard, err)
				return errs[i]
			}
			mu.Lock()
			defer mu.Unlock()
			files[i], frees[i] = f, free
			done++
			if progress != nil {
				progress(done, len(gens))
			}
			return nil
		}))
	}
	werr := g.Wait()
	if werr != nil {
		for _, err := range errs {
			// Skip the reads that failed only because another one did and cancelled them.
			if err != nil && !(ctx.Err() == nil && errors.Is(err, context.Canceled)) {
				return files, frees, err
			}
		}
		return files, frees, werr
	}
	n := int(cut.Load())
	if n == 0 {
		return files, frees, errFirstOverBudget
	}
	releaseMergeInputs(files, frees, n)
	return files[:n], frees[:n], nil
}

// releaseMergeInputs releases files[from:] that were decoded for this merge (frees[i]
// non-nil; a cached file is the cache's) and clears them.
func releaseMergeInputs(files []*sortedFile, frees []func(), from int) {
	for i := from; i < len(files); i++ {
		if files[i] != nil && frees[i] != nil {
			files[i].rec.Release()
			frees[i]() // after the record that aliases the bytes
		}
		files[i], frees[i] = nil, nil
	}
}

// readGenForMerge uses a cached decode if a reader already paid for it, else decodes without
// caching into a buffer of acct, since a merge reads each generation once just before it
// dies; free (nil for a cached file) returns the bytes to acct after the record is released.
func (s *Store) readGenForMerge(ctx context.Context, acct *memAccount, p, checksum string, recBytes, prepaid int64) (_ *sortedFile, free func(), _ error) {
	buf := acct.readBuffer(prepaid)
	if f := s.db.cache.peek(p); f != nil {
		buf.free() // credits the prepaid bytes
		return f, nil, nil
	}
	f, err := s.readGen(ctx, readSource{path: p, checksum: checksum, bytes: recBytes}, buf.alloc, acct)
	if err != nil {
		buf.free()
		return nil, nil, err
	}
	return f, buf.free, nil
}

// mergedMeanwhile turns a generation read that failed because another attempt committed and
// finished it after this prepare planned into a retryable ErrConflict, so the retry plans
// against the new watermark; any other err is returned as it is.
func (s *Store) mergedMeanwhile(ctx context.Context, shard string, planned uint64, err error) error {
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	base, berr := s.loadBase(ctx)
	if berr != nil || base.Watermarks[shard] <= planned {
		return err
	}
	return fmt.Errorf("%s shard %s: another attempt merged through generation %d while this prepare read its plan (%v): %w",
		s.target, shard, base.Watermarks[shard], err, ErrConflict)
}
