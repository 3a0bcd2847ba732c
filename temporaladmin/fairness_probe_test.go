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
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			// The probe reads an order of dispatches, which a loaded machine can blur once;
			// it must tell the server's setting in two tries of three.
			right := 0
			for try := 0; try < 3 && right < 2; try++ {
				start := time.Now()
				got, err := temporaladmin.ProbeFairness(ctx, c, "")
				require.NoError(t, err)
				t.Logf("probe answered %v in %s", got, time.Since(start).Round(time.Millisecond))
				if got == on {
					right++
				}
			}
			require.Equal(t, 2, right, "the probe told enableFairness=%v in fewer than two tries of three", on)
		})
	}
}
