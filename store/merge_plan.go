package store

import (
	"fmt"

	"github.com/walkeeper/walkeeper/store/manifest"
)

// The plan phase of a merge: which generations of a shard one pass folds, fitted to the
// memory budget. Everything here is pure (no I/O, no waiting, no lock); Prepare
// (merge_prepare.go) executes the plan under its shared mergeLock.

// MaxPassGenerations caps the generations of one merge pass whatever its caps say, so that
// its PreparedMerge, which lists them all, stays under the 256 KiB payload budget
// (TestPassGenerationsFitAPayload).
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

// planMerge picks what one merge pass folds: the oldest pending generations (ascending), at
// most caps.maxGens and MaxPassGenerations, through the one whose bytes reach caps.maxBytes,
// the first always taken whole so an oversized generation still makes progress; then the
// longest prefix whose footprint grow (a non-waiting TryGrow, nil = no budget) accepts, grown
// before reading so the reads can run concurrently. errFirstOverBudget means grow refused
// even the first generation.
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

// refit fits the plan to the decoded sizes of its generations (decoded[i] is gens[i]), as
// planMerge fitted it to the manifest's, since memory holds the decoded size; decoded may be
// a prefix, the generations an account that could not hold them all did hold (growth rule,
// doc.go), and the plan keeps at most that prefix.
func (p *mergePlan) refit(decoded []int64, grow func(total int64) bool) error {
	n, fitted := fitToBudget(decoded, grow)
	if n == 0 {
		return errFirstOverBudget
	}
	p.gens, p.bytes = p.gens[:n], fitted
	return nil
}

// fitToBudget returns the length and total size of the longest prefix of sizes whose
// footprint grow accepts.
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

// mergeReservation is what a prepare reserves in one all-or-nothing acquire before reading:
// the footprint of a merge of maxBytes, clamped to the budget's limit (the whole limit with
// no byte cap), so that nobody waits while holding part of what they need.
func mergeReservation(maxBytes, limit int64) int64 {
	want := int64(0)
	if maxBytes > 0 {
		// The read buffers take up to a quarter more (size classes), reserved up front since
		// growth is refused while other merges wait.
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

// mergeOverheadFactor and mergeOverheadBytes define mergeFootprint: the input is held whole,
// plus picks and key views (up to 1/8 of it) and the output window, as measured in
// `walkeeper-bench memory` (docs/benchmarks/memory.md).
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
