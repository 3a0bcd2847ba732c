package store

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A read group's arena takes at most what the group was admitted with. arenaEstimate counted
// the objects packed into 1 MiB chunks as if they filled them (nine generations of 215 KB
// take a third chunk) and 2 KiB of IPC metadata an object (a generation of a 256-field schema
// holds about 41 KB), so such a group grew its reservation at load, and with the rest of the
// read budget busy it failed budget_busy where the right estimate would have been admitted.
func TestFindingArenaEstimateCoversPackingAndWideSchemas(t *testing.T) {
	ctx := context.Background()
	wide := []Field{{Name: "id", Type: "string"}}
	for i := 1; i < 256; i++ {
		wide = append(wide, Field{Name: fmt.Sprintf("f%03d", i), Type: "string", Nullable: true})
	}
	for _, c := range []struct {
		name             string
		fields           []Field
		gens, rows, pads int
	}{
		{"packed chunks", testSchema.Fields, 9, packedGenerationRows, 1000},
		{"256 fields", wide, readFanIn, 10, 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			rb := NewBudget(64 << 20)
			db := openTestDB(t, "file://"+t.TempDir()+"?nosync=1", "w1", func(o *Options) {
				o.ReadBudget = rb
				o.CacheBytes = 1 // every generation is read into the arena
			})
			s := call(db.Create(ctx, Target{Kind: KindGeneric, Name: "estimate"}, CreateOptions{Schema: &Schema{Fields: c.fields}})).must(t)
			pad := strings.Repeat("p", c.pads)
			for g := 0; g < c.gens; g++ {
				var rs []Row
				for i := 0; i < c.rows; i++ {
					v := make([]any, len(c.fields))
					for j := range v {
						v[j] = pad
					}
					k := fmt.Sprintf("k%02d-%04d", g, i)
					v[0] = k
					if len(c.fields) == len(testSchema.Fields) {
						v[1] = int64(i)
					}
					rs = append(rs, Row{Key: k, Values: v})
				}
				seal(t, s, rs...)
			}
			snap := call(s.snapshot(ctx, true)).must(t)
			srcs := s.sources(snap, SourceAll, func(string, string) bool { return true })
			want, private := privateEstimate(s, srcs)
			require.Equal(t, c.gens, private, "one group of generations read privately")

			g := call(s.openGroup(ctx, srcs, "")).must(t)
			t.Logf("%d generations: admitted %d, the arena took %d, reserved %d", c.gens, want, rb.Allocated(), rb.Reserved())
			require.LessOrEqual(t, rb.Allocated(), want, "the arena takes at most its estimate")
			require.Equal(t, want, rb.Reserved(), "the reservation did not grow at load")
			g.release()

			blocker := mustReserve(t, rb, rb.Limit()-want)
			page, err := s.List(ctx, ListOptions{Limit: 10000})
			require.NoError(t, err, "the read fits in exactly its estimate")
			require.Len(t, page.Rows, c.gens*c.rows)
			blocker.Release()
			require.Zero(t, rb.Reserved())
			require.Zero(t, rb.Allocated())
		})
	}
}
