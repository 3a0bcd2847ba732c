package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
)

// roundOrder visits the shards with something estimated pending, the most pending
// generations first, ties by shard id, and leaves its input as it was.
func TestRoundOrder(t *testing.T) {
	run := func(shard string, pending int) *shardRun {
		return &shardRun{res: contract.ShardMergeResult{Shard: shard, Pending: pending}}
	}
	for _, tc := range []struct {
		name string
		in   []*shardRun
		want []string
	}{
		{name: "empty", in: nil, want: nil},
		{name: "one", in: []*shardRun{run("a", 3)}, want: []string{"a"}},
		{name: "most pending first", in: []*shardRun{run("a", 1), run("b", 9), run("c", 4)}, want: []string{"b", "c", "a"}},
		{name: "ties by shard id", in: []*shardRun{run("c", 2), run("a", 2), run("b", 2)}, want: []string{"a", "b", "c"}},
		{name: "pending then id", in: []*shardRun{run("d", 0), run("c", 5), run("b", 1), run("a", 5)}, want: []string{"a", "c", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := append([]*shardRun(nil), tc.in...)
			var got []string
			for _, sh := range roundOrder(tc.in) {
				got = append(got, sh.res.Shard)
			}
			require.Equal(t, tc.want, got)
			require.Equal(t, before, tc.in, "roundOrder must not reorder its input")
		})
	}
}
