package store

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/manifest"
)

const mib = int64(1 << 20)

func gensOf(sizes ...int64) []manifest.Gen {
	out := make([]manifest.Gen, len(sizes))
	for i, sz := range sizes {
		out[i] = manifest.Gen{Gen: uint64(i + 1), Bytes: sz}
	}
	return out
}

// planBudget is the budget state a plan is fitted in: a real Budget of limit bytes of which
// others already hold `others`, and this merge's initial reservation of `initial` bytes.
type planBudget struct {
	limit, others, initial int64
}

// grow returns the TryGrow of a real reservation in that state, or nil for "no budget".
func (b *planBudget) grow(t *testing.T) func(int64) bool {
	t.Helper()
	if b == nil {
		return nil
	}
	ctx := context.Background()
	budget := NewBudget(b.limit)
	if b.others > 0 {
		other, _, err := budget.Reserve(ctx, b.others)
		require.NoError(t, err)
		t.Cleanup(other.Release)
	}
	res, _, err := budget.Reserve(ctx, b.initial)
	require.NoError(t, err)
	t.Cleanup(res.Release)
	return res.TryGrow
}

func TestPlanMerge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending []manifest.Gen
		caps    mergeCaps
		budget  *planBudget
		want    []uint64 // planned generations; nil = empty plan
		bytes   int64
		busy    bool // ErrBudgetBusy: not even the first generation fits
	}{
		{name: "nothing pending", pending: nil, want: nil},
		{name: "no caps, no budget: everything", pending: gensOf(10, 20, 30), want: []uint64{1, 2, 3}, bytes: 60},
		{name: "generation cap", pending: gensOf(10, 20, 30, 40), caps: mergeCaps{maxGens: 2}, want: []uint64{1, 2}, bytes: 30},
		{name: "generation cap above pending", pending: gensOf(10, 20), caps: mergeCaps{maxGens: 8}, want: []uint64{1, 2}, bytes: 30},
		{name: "byte cap stops after the generation that reaches it", pending: gensOf(10, 10, 10, 10), caps: mergeCaps{maxBytes: 25}, want: []uint64{1, 2, 3}, bytes: 30},
		{name: "byte cap reached exactly", pending: gensOf(10, 10, 10), caps: mergeCaps{maxBytes: 20}, want: []uint64{1, 2}, bytes: 20},
		{name: "first generation above the byte cap is taken whole", pending: gensOf(100, 10), caps: mergeCaps{maxBytes: 25}, want: []uint64{1}, bytes: 100},
		{name: "both caps: the tighter wins", pending: gensOf(10, 10, 10, 10), caps: mergeCaps{maxGens: 3, maxBytes: 15}, want: []uint64{1, 2}, bytes: 20},
		{name: "budget fits all", pending: gensOf(8*mib, 8*mib, 8*mib), budget: &planBudget{limit: 1 << 40, initial: mergeFootprint(readBufferBytes(8 * mib))},
			want: []uint64{1, 2, 3}, bytes: 24 * mib},
		// 100 MiB budget, 55 held by another merge, 31.25 (one generation's footprint: its
		// 10 MiB read buffer, the 8 MiB object's size class) by this one: growing to two
		// generations' footprint (42.5) takes 11.25 of the 13.75 free, three (53.75) would
		// need 11.25 more.
		{name: "budget fits a prefix", pending: gensOf(8*mib, 8*mib, 8*mib), budget: &planBudget{limit: 100 * mib, others: 55 * mib, initial: mergeFootprint(readBufferBytes(8 * mib))},
			want: []uint64{1, 2}, bytes: 16 * mib},
		{name: "caps then budget", pending: gensOf(8*mib, 8*mib, 8*mib, 8*mib), caps: mergeCaps{maxGens: 3}, budget: &planBudget{limit: 100 * mib, others: 55 * mib, initial: mergeFootprint(readBufferBytes(8 * mib))},
			want: []uint64{1, 2}, bytes: 16 * mib},
		{name: "first generation bigger than the free budget", pending: gensOf(64*mib, 8*mib), budget: &planBudget{limit: 100 * mib, others: 90 * mib, initial: 10 * mib},
			busy: true},
		// A lone merge holding the whole limit may grow past it: an oversized generation
		// still makes progress once the budget is idle.
		{name: "single generation bigger than an idle budget", pending: gensOf(64*mib, 8*mib), budget: &planBudget{limit: 10 * mib, initial: 10 * mib},
			want: []uint64{1, 2}, bytes: 72 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := planMerge(tc.pending, tc.caps, tc.budget.grow(t))
			if tc.busy {
				require.ErrorIs(t, err, ErrBudgetBusy)
				require.Empty(t, plan.gens)
				return
			}
			require.NoError(t, err)
			if tc.want == nil {
				require.Empty(t, plan.gens)
				return
			}
			require.Equal(t, tc.want, plan.generations())
			require.Equal(t, tc.want[0], plan.from())
			require.Equal(t, tc.want[len(tc.want)-1], plan.through())
			require.Equal(t, tc.bytes, plan.bytes)
		})
	}
}

// refit fits the plan again to the decoded sizes: a prefix that no longer fits is cut, and
// the plan's bytes become the decoded figure.
func TestMergePlanRefit(t *testing.T) {
	b := &planBudget{limit: 100 * mib, others: 55 * mib, initial: mergeFootprint(readBufferBytes(8 * mib))}
	grow := b.grow(t)
	plan := call(planMerge(gensOf(8*mib, 8*mib), mergeCaps{}, grow)).must(t)
	require.Equal(t, []uint64{1, 2}, plan.generations())

	// Same sizes decoded: nothing changes.
	same := plan
	require.NoError(t, same.refit([]int64{8 * mib, 8 * mib}, grow))
	require.Equal(t, []uint64{1, 2}, same.generations())
	require.Equal(t, 16*mib, same.bytes)

	// The second generation decodes larger than its manifest said and no longer fits.
	bigger := plan
	require.NoError(t, bigger.refit([]int64{8 * mib, 12 * mib}, grow))
	require.Equal(t, []uint64{1}, bigger.generations())
	require.Equal(t, 8*mib, bigger.bytes)

	// Not even the first fits any more.
	none := plan
	require.ErrorIs(t, none.refit([]int64{20 * mib, 8 * mib}, grow), ErrBudgetBusy)
	require.Equal(t, []uint64{1, 2}, none.generations(), "a failed refit leaves the plan as it was")
}

func TestFitToBudget(t *testing.T) {
	accept := func(limit int64) func(int64) bool { return func(total int64) bool { return total <= limit } }
	buf := readBufferBytes(mib) // a 1 MiB generation's read buffer: the 1.25 MiB class
	for _, tc := range []struct {
		name   string
		sizes  []int64
		grow   func(int64) bool
		n      int
		fitted int64
	}{
		{"no sizes", nil, accept(0), 0, 0},
		{"no budget", []int64{1, 2, 3}, nil, 3, 6},
		{"all fit", []int64{mib, mib}, accept(mergeFootprint(2 * buf)), 2, 2 * mib},
		{"prefix fits", []int64{mib, mib, mib}, accept(mergeFootprint(2 * buf)), 2, 2 * mib},
		{"none fits", []int64{mib}, accept(mergeFootprint(buf) - 1), 0, 0},
		// The first refusal ends the prefix even if a later total would be accepted.
		{"stops at the first refusal", []int64{mib, mib}, func(total int64) bool { return total != mergeFootprint(buf) }, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, fitted := fitToBudget(tc.sizes, tc.grow)
			require.Equal(t, tc.n, n)
			require.Equal(t, tc.fitted, fitted)
		})
	}
}

func TestMergeReservation(t *testing.T) {
	for _, tc := range []struct {
		name            string
		maxBytes, limit int64
		want            int64
	}{
		{"no cap, unlimited: nothing up front", 0, 0, 0},
		{"cap, unlimited: the footprint of the cap's rounded buffers", 64 * mib, 0, mergeFootprint(80 * mib)},
		{"no cap, limited: the whole limit", 0, 512 * mib, 512 * mib},
		{"cap below the limit: the footprint of the cap's rounded buffers", 64 * mib, 512 * mib, mergeFootprint(80 * mib)},
		{"cap above the limit: the limit", 1 << 30, 512 * mib, 512 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, mergeReservation(tc.maxBytes, tc.limit))
		})
	}
}

func TestPlanCompaction(t *testing.T) {
	runs := func(sizes ...int64) []manifest.Run {
		out := make([]manifest.Run, len(sizes))
		for i, sz := range sizes {
			out[i] = manifest.Run{ID: string(rune('a' + i)), Bytes: sz}
		}
		return out
	}
	ids := func(rs []manifest.Run) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		runs     []manifest.Run
		maxRuns  int
		maxBytes int64
		want     []string // nil: nothing to do
		allRuns  bool
	}{
		{name: "no runs", runs: nil},
		{name: "one run", runs: runs(10)},
		{name: "smallest first, no caps", runs: runs(30, 10, 20), want: []string{"b", "c", "a"}, allRuns: true},
		{name: "ties broken by id", runs: runs(10, 10, 5), want: []string{"c", "a", "b"}, allRuns: true},
		{name: "run cap", runs: runs(30, 10, 20, 40), maxRuns: 2, want: []string{"b", "c"}},
		{name: "byte cap stops after the run that reaches it", runs: runs(10, 10, 10, 10), maxBytes: 25, want: []string{"a", "b", "c"}},
		{name: "byte cap still takes two runs", runs: runs(100, 200, 300), maxBytes: 50, want: []string{"a", "b"}},
		{name: "run cap of one is nothing to do", runs: runs(10, 20), maxRuns: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := &manifest.Base{Runs: tc.runs}
			p := planCompaction(base, nil, tc.maxRuns, tc.maxBytes)
			require.Equal(t, tc.want, ids(p.inputs))
			require.Equal(t, tc.allRuns, p.allRuns)
		})
	}
}

// Tombstones are dropped only when every run is rewritten and they are older than every
// pending generation.
func TestCompactionPlanDropsTombstone(t *testing.T) {
	base := &manifest.Base{Runs: []manifest.Run{{ID: "a", Bytes: 1}, {ID: "b", Bytes: 2}, {ID: "c", Bytes: 3}}}
	pending := map[string][]manifest.Gen{"s1": {{Gen: 4, MinSeq: 50}, {Gen: 5, MinSeq: 70}}, "s2": {{Gen: 1, MinSeq: 40}}}

	all := planCompaction(base, pending, 0, 0)
	require.True(t, all.allRuns)
	require.Equal(t, int64(40), all.minPendingSeq)
	require.True(t, all.dropsTombstone(39))
	require.False(t, all.dropsTombstone(40), "a tombstone as new as a pending row may shadow it")

	some := planCompaction(base, pending, 2, 0)
	require.False(t, some.allRuns)
	require.False(t, some.dropsTombstone(1), "an unread run may hold an older version")

	nothingPending := planCompaction(base, nil, 0, 0)
	require.True(t, nothingPending.dropsTombstone(1<<62))
}

// A pass of maxBytes whose generations are each just over a buffer size class takes read
// buffers a quarter larger than its bytes. Its reservation must hold them without growing
// (growth is refused while other merges wait: walkeeper-bench memory at 1 GiB failed a
// prepare with budget_busy when it did not), and fitting the plan must count the buffers,
// not the objects, so that a smaller allowance ends the pass at a prefix before reading.
func TestMergeReservationHoldsRoundedReadBuffers(t *testing.T) {
	gen := int64(1<<27) + 1 // 128 MiB + 1 byte: the buffer is the 160 MiB class
	sizes := []int64{gen, gen, gen, gen}
	maxBytes := 4 * gen
	var buffers int64
	for _, sz := range sizes {
		buffers += readBufferBytes(sz)
	}
	require.Greater(t, buffers, maxBytes+maxBytes/5, "the case needs real rounding")

	res := mergeReservation(maxBytes, 0)
	require.GreaterOrEqual(t, res, mergeFootprint(buffers), "reservation holds the rounded buffers and the overhead")
	n, total := fitToBudget(sizes, func(want int64) bool { return want <= res })
	require.Equal(t, 4, n, "a full pass fits its own reservation without growing")
	require.Equal(t, maxBytes, total)

	// The allowance of the unrounded input holds only a prefix, decided before any read.
	old := mergeFootprint(maxBytes)
	n, _ = fitToBudget(sizes, func(want int64) bool { return want <= old })
	require.Less(t, n, 4)
	require.Greater(t, n, 0)
}

// TestPassGenerationsFitAPayload: a pass takes at most MaxPassGenerations generations even
// with no generation or byte cap (max_generations 0 and a --pending-max of 0 let a shard hold
// any number), and a PreparedMerge of that many of the longest generation numbers, with a
// worst-case staged run, encodes under the 256 KiB payload budget of the Prepare result and
// the CommitRound input that carry it.
func TestPassGenerationsFitAPayload(t *testing.T) {
	const maxPayloadBytes = 256 << 10 // contract.MaxPayloadBytes (store does not import contract)
	pending := make([]manifest.Gen, 3*MaxPassGenerations)
	for i := range pending {
		pending[i] = manifest.Gen{Gen: uint64(i + 1), Bytes: 1 << 10}
	}
	plan := call(planMerge(pending, mergeCaps{}, nil)).must(t)
	require.Equal(t, MaxPassGenerations, len(plan.gens))
	plan = call(planMerge(pending, mergeCaps{maxGens: 100_000}, nil)).must(t)
	require.Equal(t, MaxPassGenerations, len(plan.gens))

	gens := make([]uint64, MaxPassGenerations)
	for i := range gens {
		gens[i] = math.MaxUint64 - uint64(MaxPassGenerations) + uint64(i)
	}
	key := strings.Repeat("k", 256)
	worst := PreparedMerge{
		Target: "generic:" + strings.Repeat("n", 128), Shard: strings.Repeat("s", 64),
		Generations: gens, Through: gens[len(gens)-1],
		Staged: []StagedFile{{
			Path: strings.Repeat("p", 200) + ".parquet", Rows: 1 << 40, Bytes: 1 << 40,
			MinKey: key, MaxKey: key, MinSeq: 1 << 60, MaxSeq: 1 << 60, Checksum: "deadbeef",
		}},
		WriterEpoch: 1 << 60, AttemptKey: strings.Repeat("a", 300), BaseVersion: 1 << 60, Bytes: 1 << 60, Rows: 1 << 60, InputRows: 1 << 60,
	}
	raw := call(json.Marshal(worst)).must(t)
	t.Logf("PreparedMerge of %d generations: %d bytes of JSON", MaxPassGenerations, len(raw))
	require.Less(t, len(raw), maxPayloadBytes)
}
