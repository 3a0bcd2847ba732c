package temporaladmin_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// TestProbeFairnessTellsOnFromOff: the probe sees fairness on a server with walkeeper's
// tuning (matching.enableFairness) and sees it off on one without, on the dev server and,
// with WALKEEPER_TEST_TEMPORAL_SERVER=cluster, on the PostgreSQL-backed 1.29 server.
func TestProbeFairnessTellsOnFromOff(t *testing.T) {
	testtemporal.SkipShort(t)
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("enableFairness=%v", on), func(t *testing.T) {
			_, c := testtemporal.StartSelected(t, testtemporal.Options{DynamicConfig: map[string]any{"matching.enableFairness": on}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			got, err := temporaladmin.ProbeFairness(ctx, c, "")
			require.NoError(t, err)
			t.Logf("probe answered %v in %s", got, time.Since(start).Round(time.Millisecond))
			require.Equal(t, on, got)
		})
	}
}
