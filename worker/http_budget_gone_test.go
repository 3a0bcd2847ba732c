package worker

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// A client that went away while its request waited for a byte budget was answered (to
// nobody) 503 budget_busy, logged at error level and counted as a 5xx, which
// WalkeeperRequestsFailing holds against the worker; like a read, an append or a scrape that
// loses its client while it waits, it is 499 canceled.
func TestFindingAClientGoneWhileWaitingForABudgetIsCanceled(t *testing.T) {
	cfg := testConfig(t)
	w, c, _ := serveAPI(t, cfg)
	expect(t, c.postJSON("/api/v1/stores/generic/gs", genericSchema), http.StatusCreated, "")
	const route = "GET /api/v1/stores/{kind}/{name}/rows"

	// Other pages hold the whole page budget.
	release, err := w.api.pages.take(context.Background(), cfg.PageBudgetBytes)
	require.NoError(t, err)
	defer release()

	// A client gives up after 200 ms of the 2 s its page would wait for the budget.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/api/v1/stores/generic/gs/rows", nil)
	require.NoError(t, err)
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the request was answered %d before the client gave up", res.StatusCode)
	}
	requests := func(code int) float64 {
		return testutil.ToFloat64(w.metrics.httpRequests.WithLabelValues(route, fmt.Sprint(code)))
	}
	require.Eventually(t, func() bool { return requests(StatusClientClosedRequest)+requests(http.StatusServiceUnavailable) > 0 },
		10*time.Second, 10*time.Millisecond, "the request given up on is counted")
	require.Equal(t, 0.0, requests(http.StatusServiceUnavailable), "a client gone while it waited counted as 503")
	require.Equal(t, 1.0, requests(StatusClientClosedRequest))
}
