package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// mixedSizeStore writes mixedSmall small rows followed by mixedBig rows of about bigBytes of
// JSON each (keys k0000, k0001, ... in that order), merges them into the base, and puts gens
// pending generations on top (keys turned big or small, tombstones), leaving a last batch
// with a tombstone in the memtable.
func mixedSizeStore(t *testing.T, gens int, tweak ...func(*Options)) *Store {
	t.Helper()
	ctx := context.Background()
	db := openTestDB(t, "file://"+t.TempDir()+"?nosync=1", "w", tweak...)
	s := createGeneric(t, db, "mixed", false)
	value := func(i int, big bool) Row {
		k := fmt.Sprintf("k%04d", i)
		if big {
			return keyRow(k, int64(i), strings.Repeat("x", bigBytes))
		}
		return keyRow(k, int64(i), "small "+k)
	}
	var rs []Row
	for i := range mixedSmall + mixedBig {
		rs = append(rs, value(i, i >= mixedSmall))
	}
	seal(t, s, rs...)
	call(s.MergeAll(ctx)).must(t)
	require.Less(t, firstRunBatches(t, s).batchRows, int64(mixedSmall+mixedBig), "the run streams in more than one batch")

	rng := rand.New(rand.NewPCG(21, 23))
	for g := 0; g <= gens; g++ {
		n := mixedSmall + mixedBig
		appendRows(t, s, value(rng.IntN(n), true), value(rng.IntN(n), false), value(n+g, g%2 == 0))
		require.NoError(t, s.Delete(ctx, fmt.Sprintf("k%04d", rng.IntN(n))))
		if g < gens { // the last batch stays in the memtable
			flush(t, s)
		}
	}
	st := call(s.Stats(ctx)).must(t)
	require.Equal(t, 1, st.Runs)
	require.Equal(t, gens, st.Shards[0].PendingGenerations)
	return s
}

// Few rows keep the one-row pages (MaxBytes 1) cheap; as many big rows as small ones make the
// streamed run's batches of 64 rows end among the big rows, so pages resume across a batch.
const (
	mixedSmall = 40
	mixedBig   = 40
	bigBytes   = 32 << 10
)

// rowsJSONBytes is the JSON text of each row, as the HTTP list pages encode it.
func rowsJSONBytes(t *testing.T, rows []map[string]any) []int64 {
	t.Helper()
	out := make([]int64, len(rows))
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i, r := range rows {
		b.Reset()
		require.NoError(t, enc.Encode(r))
		out[i] = int64(b.Len() - 1) // the newline
	}
	return out
}

// A List bounded by MaxBytes returns rows of at most MaxBytes of JSON text plus one row,
// however the row sizes mix (a page of small rows followed by big ones held every row up to
// the limit before), always at least one row, and a Next after which the following page
// resumes: paging by bytes returns exactly the rows of an unbounded listing, in order,
// across the base, pending generations with updates and tombstones, and the memtable; with
// the sources in one group and in more than readFanIn (listBounded), and with the base run
// streamed from outside the cache.
func TestListMaxBytesBoundsThePage(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gens  int
		tweak func(*Options)
	}{
		{"one group", 4, func(*Options) {}},
		{"bounded streamed", readFanIn + 4, func(o *Options) { o.CacheBytes = 1; o.ReadBudget = NewBudget(64 << 20) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s := mixedSizeStore(t, tc.gens, tc.tweak)
			all := call(s.List(ctx, ListOptions{Limit: 10000})).must(t)
			require.Empty(t, all.Next)
			require.Greater(t, len(all.Rows), mixedSmall+mixedBig/2)
			maxRow := slices.Max(rowsJSONBytes(t, all.Rows))
			require.Greater(t, maxRow, int64(bigBytes))

			for _, c := range []struct {
				limit    int
				maxBytes int64
			}{{10000, 256 << 10}, {10000, 100 << 10}, {7, 100 << 10}, {10000, 1}} {
				var got []map[string]any
				after := ""
				for pages := 0; ; pages++ {
					require.Less(t, pages, 2*len(all.Rows), "paging does not end")
					page := call(s.List(ctx, ListOptions{Limit: c.limit, MaxBytes: c.maxBytes, After: after})).must(t)
					require.NotEmpty(t, page.Rows, "a page holds at least one row")
					sizes := rowsJSONBytes(t, page.Rows)
					var total int64
					for _, n := range sizes {
						total += n
					}
					last := sizes[len(sizes)-1]
					require.LessOrEqual(t, total, c.maxBytes+maxRow, "limit %d, max %d, page %d: within MaxBytes and one row", c.limit, c.maxBytes, pages)
					require.Less(t, total-last, c.maxBytes, "limit %d, max %d, page %d: the page ends with the row that reaches MaxBytes", c.limit, c.maxBytes, pages)
					got = append(got, page.Rows...)
					if page.Next == "" {
						break
					}
					require.Equal(t, page.Rows[len(page.Rows)-1]["id"], page.Next, "next is the last row's key")
					require.True(t, len(page.Rows) == c.limit || total >= c.maxBytes, "a page that has a next is full")
					after = page.Next
				}
				require.Equal(t, all.Rows, got, "limit %d, max %d: paging by bytes skips and repeats nothing", c.limit, c.maxBytes)
			}
		})
	}
}
