package store

import (
	"fmt"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// The plan phase of a merge: which generations of a shard one pass folds, fitted to the
// memory budget. Everything here is pure (no I/O, no waiting, no lock); Prepare
// (merge_prepare.go) executes the plan under its shared mergeLock.

// MaxPassGenerations caps the generations of one merge pass whatever its caps say (0, "no
// cap", included): a pass's PreparedMerge lists every generation number, and 10,000 of the
// longest (20 digits) encode to about 207 KiB, under the 256 KiB payload budget of the
// Prepare result and the CommitRound input that carry it (TestPassGenerationsFitAPayload).
const MaxPassGenerations = 10_000

// mergeCaps bound one merge pass; 0 means no cap (but MaxPassGenerations).
type mergeCaps struct {
	maxGens  int
	maxBytes int64
}

// mergePlan is what one merge pass of a shard folds: the oldest pending generations, a
// prefix of them, whole. It is the merge's counterpart of pebble's pickedCompaction.
//
// INVARIANT: gens is a non-empty ascending prefix of the shard's pending generations, so the
// watermark the commit sets (through) covers exactly gens and nothing in between is skipped.
type mergePlan struct {
	gens []manifest.Gen
	// bytes is the input size the budget holds for the plan: the manifest's sizes after
	// planMerge, the decoded sizes after refit.
	bytes int64
}

func (p mergePlan) from() uint64    { return p.gens[0].Gen }
func (p mergePlan) through() uint64 { return p.gens[len(p.gens)-1].Gen }

// generations are the planned generation numbers, ascending.
func (p mergePlan) generations() []uint64 {
	out := make([]uint64, len(p.gens))
	for i, g := range p.gens {
		out[i] = g.Gen
	}
	return out
}

// errFirstOverBudget says that the budget cannot hold even the first generation now: the
// attempt gives up (it is retried) rather than hold memory while waiting for more.
var errFirstOverBudget = fmt.Errorf("%w while reading the first generation", ErrBudgetBusy)

// planMerge picks what one merge pass folds and fits it to the budget:
//
//  1. Caps: the oldest pending generations, at most caps.maxGens and MaxPassGenerations,
//     stopping after the generation whose bytes reach caps.maxBytes. The first generation is always taken
//     whole, so an oversized generation still makes progress; a generation is never split.
//  2. Budget: the longest prefix of those whose footprint (mergeFootprint of the manifest's
//     sizes) grow accepts. grow is the budget reservation's non-waiting TryGrow (nil = no
//     budget); growing before reading lets the reads run concurrently without any of them
//     running ahead of the budget.
//
// pending must be ascending. An empty pending gives an empty plan. errFirstOverBudget
// (an ErrBudgetBusy) means grow refused even the first generation.
func planMerge(pending []manifest.Gen, caps mergeCaps, grow func(total int64) bool) (mergePlan, error) {
	var gens []manifest.Gen
	var bytes int64
	for _, g := range pending {
		if (caps.maxGens > 0 && len(gens) >= caps.maxGens) || len(gens) >= MaxPassGenerations {
			break
		}
		gens = append(gens, g)
		bytes += g.Bytes
		if caps.maxBytes > 0 && bytes >= caps.maxBytes {
			break
		}
	}
	if len(gens) == 0 {
		return mergePlan{}, nil
	}
	sizes := make([]int64, len(gens))
	for i, g := range gens {
		sizes[i] = g.Bytes
	}
	n, fitted := fitToBudget(sizes, grow)
	if n == 0 {
		return mergePlan{}, errFirstOverBudget
	}
	return mergePlan{gens: gens[:n], bytes: fitted}, nil
}

// refit fits the plan to the decoded sizes of its generations (decoded[i] is gens[i]),
// exactly as planMerge fitted it to the manifest's: what memory holds is the decoded size,
// which agrees with the manifest's to within metadata, and the budget must hold the real
// figure. The plan keeps the prefix that fits; errFirstOverBudget if none does.
func (p *mergePlan) refit(decoded []int64, grow func(total int64) bool) error {
	n, fitted := fitToBudget(decoded[:len(p.gens)], grow)
	if n == 0 {
		return errFirstOverBudget
	}
	p.gens, p.bytes = p.gens[:n], fitted
	return nil
}

// fitToBudget returns the length of the longest prefix of sizes whose footprint grow
// accepts, and the prefix's total size. Growth is tried generation by generation and stops
// at the first refusal: the merge then takes the complete prefix that fits.
//
// REQUIRES: grow never waits (waiting while holding part of the budget could deadlock).
func fitToBudget(sizes []int64, grow func(total int64) bool) (int, int64) {
	var total, held int64
	for i, sz := range sizes {
		// What the generation's read buffer takes is its size class, up to a quarter more
		// than its bytes: the footprint counts the buffer, not the object.
		if grow != nil && !grow(mergeFootprint(held+readBufferBytes(sz))) {
			return i, total
		}
		total += sz
		held += readBufferBytes(sz)
	}
	return len(sizes), total
}

// mergeReservation is the initial allowance a prepare reserves, in one all-or-nothing
// acquire, before reading anything: the footprint of a merge of maxBytes (not just its
// input), clamped to the budget's limit (0 = unlimited); with no byte cap, the whole limit.
// Nobody waits while holding part of what they need, so merges cannot deadlock on the budget.
func mergeReservation(maxBytes, limit int64) int64 {
	want := int64(0)
	if maxBytes > 0 {
		// The read buffers of maxBytes of generations take up to a quarter more (their size
		// classes, alloc.go). Reserving that up front means a full pass never has to grow its
		// reservation, which is refused while other merges wait for the budget.
		want = mergeFootprint(maxBytes + maxBytes/maxClassRounding)
	}
	if limit > 0 && (want == 0 || want > limit) {
		want = limit
	}
	return want
}

// mergeChunkBytes is the size of the output chunk a prepare builds at a time; each chunk
// becomes at least one row group of the staged run and is released once written.
const mergeChunkBytes = 8 << 20

// mergeOverheadFactor and mergeOverheadBytes define mergeFootprint. The input is held whole
// for the newest-per-key merge (zero-copy: the decoded generations are their object bytes);
// on top come the picks and key views (~16 B per row, up to 1/8 of the input for 128 B rows)
// and the output window: one chunk being built, the Parquet writer's page buffers and the
// write buffer. Measured in `walkeeper-bench memory` (docs/benchmarks/memory.md).
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
