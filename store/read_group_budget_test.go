package store

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A read group that streams a base run privately and decodes generations through the cache
// holds one reservation for both: the run's arena and batches must fit beside the bytes the
// generations were charged. The run's footer window was compared against the whole
// reservation, generations' share included, so the group held the run's batches in bytes
// already counted for the generations and never grew.
func TestFindingMixedReadGroupKeepsTheCachedSourcesShare(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(64 << 20)
	db := openTestDB(t, "mem://", "w1", func(o *Options) {
		o.ReadBudget = rb
		o.CacheBytes = 16 << 20 // keeps files up to 4 MiB: the generations, not the decoded run
	})
	s, run := compressibleRun(t, db, "mixedgroup")
	db.cache.markLarge(run.Path) // as a first read would find from its footer, so one try streams it
	pad := strings.Repeat("g", 1000)
	for g := 0; g < 48; g++ {
		var rs []Row
		for i := 0; i < 100; i++ {
			k := fmt.Sprintf("k%06d", g*150+i)
			rs = append(rs, Row{Key: k, Values: []any{k, int64(g), pad}})
		}
		appendRows(t, s, rs...)
		flush(t, s)
	}
	snap, err := s.snapshot(ctx, true)
	require.NoError(t, err)
	srcs := s.sources(snap, SourceAll, func(string, string) bool { return true })
	require.LessOrEqual(t, len(srcs), readFanIn, "one group")

	var charged, window int64
	for _, src := range srcs {
		if !s.private(src) {
			charged += readCost(src)
		}
	}
	g, err := s.openGroup(ctx, srcs, "")
	require.NoError(t, err)
	for _, r := range g.runs {
		if r != nil {
			window += r.rb.window
		}
	}
	require.Positive(t, window, "the run streams")
	held, private := rb.Reserved(), rb.Allocated()
	t.Logf("reserved %d: generations charged %d, private allocated %d, run window %d", held, charged, private, window)
	require.GreaterOrEqual(t, held, charged+private+window,
		"the group's reservation holds the generations' charge beside the run's arena and window")

	// Decoding every batch stays within it too.
	it := newMergeIter(g.cursors(""))
	var rows int
	for {
		if _, ok := it.next(); !ok {
			break
		}
		rows++
		require.LessOrEqual(t, rb.Allocated()+charged, rb.Reserved(), "row %d", rows)
	}
	require.NoError(t, g.err())
	g.release()
	require.Equal(t, 9000, rows)
	require.Zero(t, rb.Reserved())
	require.Zero(t, rb.Allocated())
}
