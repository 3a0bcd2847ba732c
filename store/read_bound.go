package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// Bounded reads, so that a store far behind on merges slows its reads but cannot exhaust the
// process's memory: sources are opened readFanIn at a time, each group admitted by the read
// budget before its files are decoded, never holding bytes while waiting.

// readFanIn is how many sources a read opens at once.
const readFanIn = 64

// readBudgetWait is how long a read waits for the read budget before it gives up.
const readBudgetWait = 2 * time.Second

// readSource is one file a read may need, described by its manifest entry.
type readSource struct {
	path, checksum string
	run            bool
	bytes          int64
}

// sources lists the files a read of source needs whose key range keyFilter accepts: base
// runs first, then the shards' pending generations.
func (s *Store) sources(snap *readSnapshot, source string, keyFilter func(minKey, maxKey string) bool) []readSource {
	var out []readSource
	if source != SourceWAL {
		for _, r := range snap.base.Runs {
			if keyFilter(r.MinKey, r.MaxKey) {
				out = append(out, readSource{r.Path, r.Checksum, true, r.Bytes})
			}
		}
	}
	if source != SourceBase {
		for _, sh := range snap.shards {
			for _, g := range snap.pending[sh] {
				if keyFilter(g.MinKey, g.MaxKey) {
					out = append(out, readSource{g.Path, g.Checksum, false, g.Bytes})
				}
			}
		}
	}
	return out
}

// private reports whether a read decodes src outside the cache, into its group's read arena:
// a read budget is set and the cache neither holds nor would keep it.
//
// INVARIANT: the answer depends on src's size, the cache's limit and its footer only, so
// every caller decides it the same way.
func (s *Store) private(src readSource) bool {
	return s.db.opts.ReadBudget.Limit() > 0 && (!s.db.cache.keeps(src.bytes) || src.run && s.db.cache.large.has(src.path)) &&
		s.db.cache.peek(src.path) == nil
}

// readCost is what a read is first admitted with for decoding src through the cache: about its
// object for a generation, twice for a base run until its footer says (admitRunDecode), plus
// the cache's per-file overhead.
func readCost(src readSource) int64 {
	if src.run {
		return 2*src.bytes + cachedFileOverhead
	}
	return src.bytes + cachedFileOverhead
}

// readGroup is a group of a read's sources, admitted and opened: files[i] is srcs[i] decoded
// whole, or nil where runs[i] streams it.
type readGroup struct {
	files   []*sortedFile
	runs    []*listRun
	release func()
}

// cursors returns one merge cursor per source, each at its first key above after.
func (g *readGroup) cursors(after string) []*cursor {
	out := make([]*cursor, len(g.files))
	for i, f := range g.files {
		if r := g.runs[i]; r != nil {
			out[i] = r.cursor()
		} else {
			out[i] = &cursor{file: f, i: f.firstAfter(after)}
		}
	}
	return out
}

// err is the first error a streamed run's cursor met: a merge is complete only when it is nil.
func (g *readGroup) err() error {
	for _, r := range g.runs {
		if r != nil && r.err != nil {
			return r.err
		}
	}
	return nil
}

// find returns the file and row that hold key in source i of g, or nil; a streamed run
// decodes only the row groups whose key statistics may hold key, a batch at a time.
//
// REQUIRES: g was opened from the start (after ""), and find is called once per source.
func (g *readGroup) find(i int, key string) (*sortedFile, int) {
	if r := g.runs[i]; r != nil {
		r.rb.keyRowGroups(key) // before its first batch is decoded, by r.cursor
		for c := r.cursor(); c.file != nil; r.refill(c) {
			if j := c.file.find(key); j >= 0 {
				return c.file, j
			}
		}
		return nil, -1
	}
	if j := g.files[i].find(key); j >= 0 {
		return g.files[i], j
	}
	return nil, -1
}

// openGroup admits srcs to the read budget and opens them, private base runs for streaming
// from after on. A group whose runs' footers ask for more than its reservation can grow to
// without waiting is released and admitted once more with it, so it waits holding nothing.
func (s *Store) openGroup(ctx context.Context, srcs []readSource, after string) (*readGroup, error) {
	g, short, err := s.tryOpenGroup(ctx, srcs, after, 0)
	if errors.Is(err, errRunDecodesLarge) {
		// Those runs are private now, so the second try streams them.
		g, short, err = s.tryOpenGroup(ctx, srcs, after, 0)
	}
	if short > 0 {
		g, _, err = s.tryOpenGroup(ctx, srcs, after, short)
	}
	return g, err
}

// tryOpenGroup is openGroup admitted with extra bytes beyond its estimate; short is what its
// reservation lacked when it could not grow.
func (s *Store) tryOpenGroup(ctx context.Context, srcs []readSource, after string, extra int64) (_ *readGroup, short int64, _ error) {
	charged := make([]int64, len(srcs))  // what want counts for a source decoded through the cache
	requests := make([]int64, len(srcs)) // the most a private source's read asks its arena for, > 0
	var want, cached int64               // cached sums charged
	var sizes []int64
	for i, src := range srcs {
		// Capped, a manifest's declared size cannot wrap the estimate negative.
		est := src
		est.bytes = min(src.bytes, maxReadBufferRequest)
		switch {
		case s.private(src):
			requests[i] = s.arenaRequest(est)
			sizes = append(sizes, requests[i])
			if src.run {
				want += compactRunGuess(manifest.Run{Bytes: est.bytes}) // its batches, until the footer says
			}
		case s.db.cache.peek(src.path) == nil:
			charged[i] = readCost(est)
			cached += charged[i]
		}
	}
	want += cached + arenaEstimate(sizes) + int64(len(sizes))*decodedFileHeap + extra
	res, err := s.admitRead(ctx, want)
	if err != nil {
		return nil, 0, err
	}
	var arena *readArena
	var acct *memAccount
	if len(sizes) > 0 {
		acct = newMemAccount(res, s.db.opts.ReadBudget)
		// The arena and batches leave alone what the cached sources and their runs may take.
		acct.outside.Store(cached + extra)
		arena = newReadArena(acct, sizes)
	}
	// A cached run's decode takes the extra first, then grows without waiting.
	// INVARIANT: while the sources load, acct.outside is their charge, what their runs took
	// beyond it and the slack left, so a private allocation never uses bytes a run may take.
	var slackMu sync.Mutex
	slack := extra
	grow := func(i int) func(int64) bool {
		return func(need int64) bool {
			n := max(need-charged[i], 0)
			slackMu.Lock()
			take := min(slack, n)
			slack -= take
			slackMu.Unlock()
			if acct != nil {
				acct.outside.Add(n - take) // before the growth; what it takes is outside already
			}
			if n == take || res.tryGrowBy(n-take) {
				return true
			}
			if acct != nil {
				acct.outside.Add(take - n)
			}
			slackMu.Lock()
			slack += take // the growth failed: give back what was taken, no lock held across it
			slackMu.Unlock()
			return false
		}
	}
	g := &readGroup{files: make([]*sortedFile, len(srcs)), runs: make([]*listRun, len(srcs))}
	g.release = func() {
		for i, f := range g.files {
			if f != nil && requests[i] > 0 {
				f.rec.Release()
			}
		}
		for _, r := range g.runs {
			if r != nil {
				r.close()
			}
		}
		arena.free() // after the records and readers that alias it
		res.Release()
	}
	var lacks atomic.Int64          // bytes the runs decoded through the cache lack (runDecodeShort)
	var large atomic.Pointer[error] // an errRunDecodesLarge
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(16)
	for i, src := range srcs {
		eg.Go(s.db.guard("read source load", func() error {
			var err error
			switch {
			case requests[i] > 0 && src.run:
				g.runs[i], err = s.openListRun(gctx, src, arena.alloc(requests[i]), acct, after)
				if err == nil {
					g.runs[i].ctx = ctx // gctx ends with the opening; the batches are decoded later
				}
			case requests[i] > 0:
				g.files[i], err = s.readGen(gctx, src, arena.alloc(requests[i]), memory.DefaultAllocator)
			default:
				g.files[i], err = s.load(gctx, src, grow(i))
				// The others go on, so that one try finds every such run and what they lack.
				var rs *runDecodeShort
				switch {
				case errors.As(err, &rs):
					lacks.Add(rs.extra)
					err = nil
				case errors.Is(err, errRunDecodesLarge):
					refused := err
					large.Store(&refused)
					err = nil
				}
			}
			return err
		}))
	}
	err = eg.Wait()
	if l := large.Load(); l != nil && err == nil {
		err = *l
	}
	if n := lacks.Load(); n > 0 && err == nil {
		short, err = n, fmt.Errorf("%s: decoding base runs through the cache needs %d bytes more of the read budget: %w", s.target, n, ErrBudgetBusy)
	}
	if err == nil && acct != nil {
		acct.outside.Add(-slack) // no cached run took it: the private runs' batches may
		short, err = s.growForRuns(res, acct, g.runs)
	}
	if err != nil {
		g.release()
		return nil, short, err
	}
	return g, 0, nil
}

// errReadBudgetWait is ErrBudgetBusy for a read not admitted within readBudgetWait.
var errReadBudgetWait = fmt.Errorf("%w", ErrBudgetBusy)

// admitRead reserves want bytes of the read budget, waiting at most readBudgetWait.
func (s *Store) admitRead(ctx context.Context, want int64) (*Reservation, error) {
	b := s.db.opts.ReadBudget
	if b == nil || want == 0 {
		return nil, nil
	}
	res, timedOut, err := reserveWithin(ctx, b, want, readBudgetWait)
	if timedOut {
		return nil, fmt.Errorf("%s: read of %d bytes waited %s for the read budget of %d: %w",
			s.target, want, readBudgetWait, b.Limit(), errReadBudgetWait)
	}
	return res, err
}

// listCandidate is one key's newest version within a group (src < 0: memtable entry
// memRows[row]), rendered early only from a streamed run; its strings are copies.
type listCandidate struct {
	key      string
	seq      int64
	shard    string
	deleted  bool
	src      int
	row      int
	bytes    int64 // the length of the row's JSON text (0 for a tombstone)
	rendered map[string]any
}

// listCandidatesPerGroup caps what one group contributes to a round; any cap >= 1 is correct.
const listCandidatesPerGroup = 1024

// listGroup returns the newest version of each of a group's first max keys after after (at or
// below upTo when bounded, up to the one filling maxBytes) and whether more are undecided.
func (s *Store) listGroup(g *readGroup, first int, after string, max int, maxBytes int64, upTo string, bounded bool) ([]listCandidate, bool, error) {
	cursors := g.cursors(after)
	index := make(map[*cursor]int, len(cursors))
	for j, c := range cursors {
		index[c] = first + j
	}
	it := newMergeIter(cursors)
	var out []listCandidate
	var size int64
	for len(out) < max && !pageFull(size, maxBytes) {
		h, ok := it.next()
		if !ok || bounded && h.f.view.Key(h.i) > upTo {
			return out, false, g.err()
		}
		v := h.f.view
		// One copy per shard id (a store has few, candidates thousands), which unique clones
		// off the group's buffers.
		c := listCandidate{key: strings.Clone(v.Key(h.i)), seq: v.Seq(h.i), shard: unique.Make(v.Shard(h.i)).Value(),
			deleted: v.Deleted(h.i), src: index[h.c], row: h.i}
		if !c.deleted {
			c.bytes = s.codec.RowJSONBytes(h.f.rec, h.i)
			size += c.bytes
			if h.c.refill != nil {
				c.rendered = cloneRow(s.codec.RowJSON(h.f.rec, h.i))
			}
		}
		out = append(out, c)
	}
	return out, it.more(), g.err()
}

// mergeCandidates merges two key-ordered candidate lists, keeping the newer version of a key.
func mergeCandidates(a, b []listCandidate) []listCandidate {
	out := make([]listCandidate, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0].key < b[0].key:
			out, a = append(out, a[0]), a[1:]
		case b[0].key < a[0].key:
			out, b = append(out, b[0]), b[1:]
		default:
			if newer(b[0].seq, b[0].shard, a[0].seq, a[0].shard) {
				out = append(out, b[0])
			} else {
				out = append(out, a[0])
			}
			a, b = a[1:], b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// listBounded is List over more than readFanIn sources, round by round; mem iterates the
// memtables after opts.After and takes part in each round like one more group.
//
// INVARIANT: a key is emitted only once it is at or below the frontier of every group (and of
// the memtables) that had more keys, so no unread version of it is left.
func (s *Store) listBounded(ctx context.Context, srcs []readSource, mem *memIter, memShard string, opts ListOptions) (ListPage, error) {
	var picked []listCandidate
	var pickedBytes int64
	var memRows []*memEntry // the memtable entries taken so far, by listCandidate.row
	next := ""
	after := opts.After
	per := min(max(opts.Limit, 1), listCandidatesPerGroup)
rounds:
	for {
		// cands is the newest version per key so far, in key order.
		var cands []listCandidate
		frontier, bounded := "", false
		first := 0
		// room > 0 while the page is not full; without a bound it is <= 0, which bounds nothing.
		room := opts.MaxBytes - pickedBytes
		for grp := range slices.Chunk(srcs, readFanIn) {
			g, err := s.openGroup(ctx, grp, after)
			if err != nil {
				return ListPage{}, err
			}
			got, more, err := s.listGroup(g, first, after, per, room, frontier, bounded)
			g.release()
			if err != nil {
				return ListPage{}, err
			}
			first += len(grp)
			if more && (!bounded || got[len(got)-1].key < frontier) {
				frontier, bounded = got[len(got)-1].key, true
			}
			cands = mergeCandidates(cands, got)
			if bounded {
				cands = cands[:sort.Search(len(cands), func(i int) bool { return cands[i].key > frontier })]
			}
			// Keys past the per-th, or past the row filling the room, wait for the next round.
			if n := roundCut(cands, per, room); n < len(cands) {
				cands = cands[:n]
				frontier, bounded = cands[n-1].key, true
			}
		}
		// The iterator is already past after: what earlier rounds took is decided.
		var memCands []listCandidate
		for len(memCands) < per {
			e := mem.peek()
			if e == nil || bounded && e.key > frontier {
				break
			}
			c := listCandidate{key: e.key, seq: e.r.seq, shard: memShard, deleted: e.r.deleted, src: -1, row: len(memRows)}
			if !c.deleted {
				c.bytes = rowcodec.RowToJSONBytes(s.meta.Schema, e.r.row)
			}
			memCands = append(memCands, c)
			memRows = append(memRows, e)
			mem.next()
		}
		if e := mem.peek(); len(memCands) == per && e != nil && (!bounded || e.key <= frontier) {
			frontier, bounded = memCands[per-1].key, true
			cands = cands[:sort.Search(len(cands), func(i int) bool { return cands[i].key > frontier })]
		}
		decided := mergeCandidates(cands, memCands)
		for i, c := range decided {
			if c.deleted {
				continue
			}
			picked = append(picked, c)
			pickedBytes += c.bytes
			if len(picked) == opts.Limit || pageFull(pickedBytes, opts.MaxBytes) {
				if bounded || i < len(decided)-1 {
					next = c.key
				}
				break rounds
			}
		}
		if !bounded {
			break
		}
		after = frontier
	}
	rows, err := s.renderPage(ctx, srcs, memRows, picked)
	if err != nil {
		return ListPage{}, err
	}
	return ListPage{Rows: rows, Next: next}, nil
}

// roundCut is how many of cands a round keeps: at most per, up to the row that fills room.
func roundCut(cands []listCandidate, per int, room int64) int {
	n := min(len(cands), per)
	var size int64
	for i, c := range cands[:n] {
		if size += c.bytes; pageFull(size, room) {
			return i + 1
		}
	}
	return n
}

// renderPage renders the picked rows, opening only their sources, readFanIn at a time.
func (s *Store) renderPage(ctx context.Context, srcs []readSource, memRows []*memEntry, picked []listCandidate) ([]map[string]any, error) {
	rows := make([]map[string]any, len(picked))
	bySrc := map[int][]int{} // source -> indexes into picked
	for k, c := range picked {
		switch {
		case c.rendered != nil:
			rows[k] = c.rendered
		case c.src < 0:
			rows[k] = rowcodec.RowToJSON(s.meta.Schema, memRows[c.row].r.row)
		default:
			bySrc[c.src] = append(bySrc[c.src], k)
		}
	}
	for chunk := range slices.Chunk(slices.Sorted(maps.Keys(bySrc)), readFanIn) {
		grp := make([]readSource, len(chunk))
		for j, si := range chunk {
			grp[j] = srcs[si]
		}
		g, err := s.openGroup(ctx, grp, "")
		if err != nil {
			return nil, err
		}
		for j, si := range chunk {
			for _, k := range bySrc[si] {
				rows[k] = cloneRow(s.codec.RowJSON(g.files[j].rec, picked[k].row))
			}
		}
		g.release()
	}
	return rows, nil
}
