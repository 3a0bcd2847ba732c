package store

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A Get over base runs that the cache does not keep decodes only the row groups that may hold
// its key, a batch at a time, into the read budget's buffers: every key reads back as List
// (whole runs) shows it, tombstones and shadowed versions included, within the read budget,
// and every byte goes back to it.
func TestGetFromRunsPagedByRowGroups(t *testing.T) {
	ctx := context.Background()
	rb := NewBudget(32 << 20)
	db := openTestDB(t, "file://"+t.TempDir(), "w1", func(o *Options) {
		o.MergeMaxGenerations = 1
		o.ReadBudget = rb
		o.CacheBytes = 1 // keeps nothing: every run is read privately
	})
	s := createGeneric(t, db, "getruns", false)
	pad := strings.Repeat("v", 1000) // 9 MB runs: two row groups of a merge's 8 MiB chunks
	const rows = 9000
	for g := 0; g < 2; g++ {
		var rs []Row
		for i := 0; i < rows; i++ {
			k := fmt.Sprintf("k%06d", i*2+g) // interleaved
			if g == 1 && i%3 == 0 {
				k = fmt.Sprintf("k%06d", i*2) // shadows a run-0 version
			}
			rs = append(rs, Row{Key: k, Values: []any{k, int64(g*rows + i), pad}})
		}
		appendRows(t, s, rs...)
		flush(t, s)
		_, err := s.MergeAll(ctx)
		require.NoError(t, err)
	}
	for i := 0; i < rows; i += 7 {
		require.NoError(t, s.Delete(ctx, fmt.Sprintf("k%06d", i*2+1)))
	}
	flush(t, s)
	_, err := s.MergeAll(ctx)
	require.NoError(t, err)
	base, err := s.loadBase(ctx)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(base.Runs), 2)
	data, err := db.bucket.Get(ctx, base.Runs[0].Path)
	require.NoError(t, err)
	r, err := openRunBatches(ctx, nil, data, s.codec, "run")
	require.NoError(t, err)
	require.Greater(t, r.pf.NumRowGroups(), 1, "the run must have several row groups to pick from")
	r.close()

	want := bigList(t, s)
	for i := 0; i < 2*rows; i += 331 {
		k := fmt.Sprintf("k%06d", i)
		got, err := s.Get(ctx, k)
		if w, ok := want[k]; ok {
			require.NoError(t, err, k)
			require.Equal(t, w, fmt.Sprint(got["n"], "/", got["s"]), k)
		} else {
			require.ErrorIs(t, err, ErrNotFound, k)
		}
	}
	require.Zero(t, rb.Reserved())
	require.Zero(t, rb.Allocated(), "every buffer of the reads went back")
	require.LessOrEqual(t, rb.Pooled(), rb.Limit())
}
