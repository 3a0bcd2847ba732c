package objstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMemIndexAgainstModel writes, deletes, re-writes and lists keys at random, across
// pages of a listing (memListPage), and checks every listing against a plain map.
func TestMemIndexAgainstModel(t *testing.T) {
	ctx := context.Background()
	m := newMemBackend()
	model := map[string]bool{}
	rng := rand.New(rand.NewPCG(1, 2))
	check := func(prefix, after string) {
		t.Helper()
		var got []string
		require.NoError(t, m.listFrom(ctx, prefix, after, func(o ObjectInfo) error { got = append(got, o.Key); return nil }))
		var want []string
		for k := range model {
			if len(k) >= len(prefix) && k[:len(prefix)] == prefix && k > after {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		require.Equal(t, want, got, "list(%q, after %q)", prefix, after)
	}
	for op := 0; op < 16*memListPage; op++ {
		k := fmt.Sprintf("p%d/k%05d", rng.IntN(3), rng.IntN(8*memListPage))
		switch r := rng.IntN(10); {
		case r < 6:
			require.NoError(t, m.put(ctx, k, []byte{1}, false, nil))
			model[k] = true
		case r < 9:
			require.NoError(t, m.delete(ctx, k))
			delete(model, k)
		default:
			check(fmt.Sprintf("p%d/", rng.IntN(3)), k)
		}
		if op%1000 == 0 {
			check("", "")
		}
	}
	check("", "")
}
