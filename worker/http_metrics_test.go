package worker

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// heldCollector holds every scrape that gathers it until release is closed.
type heldCollector struct {
	entered chan struct{} // one value per Collect begun
	release chan struct{}
}

func (heldCollector) Describe(chan<- *prometheus.Desc) {}
func (h heldCollector) Collect(chan<- prometheus.Metric) {
	h.entered <- struct{}{}
	<-h.release
}

// At most maxScrapes scrapes of /metrics are in flight: while that many are held open, another
// waits briefly and gets 503 budget_busy in JSON with Retry-After, and once they end scrapes
// work again.
func TestHTTPMetricsScrapesInFlightAreCapped(t *testing.T) {
	defer func(d time.Duration) { budgetWait = d }(budgetWait)
	budgetWait = 100 * time.Millisecond
	w, c, _ := serveAPI(t, testConfig(t))
	held := heldCollector{entered: make(chan struct{}, 4*maxScrapes), release: make(chan struct{})}
	w.api.metrics.Registry.MustRegister(held)
	release := sync.OnceFunc(func() { close(held.release) })
	defer release()

	url := "http://" + w.HTTPAddr() + "/metrics"
	statuses := make(chan int, maxScrapes)
	for range maxScrapes {
		go func() {
			r, err := http.Get(url)
			if err != nil {
				statuses <- 0
				return
			}
			_, _ = io.Copy(io.Discard, r.Body)
			_ = r.Body.Close()
			statuses <- r.StatusCode
		}()
	}
	for range maxScrapes {
		select {
		case <-held.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the held scrapes did not begin")
		}
	}

	// Without the cap this scrape would be held too: the client's timeout turns that into a
	// failure instead of a hung test.
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	r := send(t, &http.Client{Timeout: 10 * time.Second}, req)
	expect(t, r, http.StatusServiceUnavailable, CodeBudgetBusy)
	require.Equal(t, "5", r.header.Get("Retry-After"))

	release()
	for range maxScrapes {
		require.Equal(t, http.StatusOK, <-statuses)
	}
	expect(t, c.get("/metrics"), http.StatusOK, "")
	require.True(t, w.api.scrapes.TryAcquire(maxScrapes), "ended scrapes give their slots back")
	w.api.scrapes.Release(maxScrapes)
}

// /metrics filters on a repeated name[] (as Prometheus federation repeats its parameters): the
// answer holds the union of the named families. At most maxMetricNames names, each a metric
// name; any other repeated parameter is still 400 invalid_input, on /metrics as elsewhere.
func TestHTTPMetricsNameFilterIsAUnion(t *testing.T) {
	_, c, _ := serveAPI(t, testConfig(t))
	for _, path := range []string{
		"/metrics?name[]=walkeeper_http_unauthenticated&name[]=walkeeper_temporal_fairness&name[]=walkeeper_temporal_fairness",
		"/metrics?name%5B%5D=walkeeper_http_unauthenticated&name%5B%5D=walkeeper_temporal_fairness",
	} {
		r := c.get(path)
		require.Equal(t, http.StatusOK, r.status, "%s: %s", path, r.body)
		body := string(r.body)
		require.Contains(t, body, "# TYPE walkeeper_http_unauthenticated gauge", path)
		require.Contains(t, body, "# TYPE walkeeper_temporal_fairness gauge", path)
		require.Equal(t, 2, strings.Count(body, "# TYPE "), "%s: %s", path, body)
	}

	names := strings.Repeat("name[]=walkeeper_temporal_fairness&", maxMetricNames)
	expect(t, c.get("/metrics?"+names), http.StatusOK, "")
	m := expect(t, c.get("/metrics?"+names+"name[]=go_goroutines"), http.StatusBadRequest, CodeInvalidInput)
	require.Contains(t, m["error"], "at most 64 names")
	for _, bad := range []string{"", "1abc", "a-b", "a%20b", "a{b}", "é"} {
		m := expect(t, c.get("/metrics?name[]=go_goroutines&name[]="+bad), http.StatusBadRequest, CodeInvalidInput)
		require.Contains(t, m["error"], "is not a metric name", bad)
		expect(t, c.get("/metrics?name[]="+bad), http.StatusBadRequest, CodeInvalidInput)
	}

	m = expect(t, c.get("/metrics?match[]=up&match[]=go_goroutines"), http.StatusBadRequest, CodeInvalidInput)
	require.Contains(t, m["error"], `"match[]" is given 2 times; on /metrics only name[] may repeat`)
	expect(t, c.get("/metrics?name[]=go_goroutines&x=1&x=2"), http.StatusBadRequest, CodeInvalidInput)
	expect(t, c.get("/api/v1/stores?name[]=a&name[]=b"), http.StatusBadRequest, CodeInvalidInput)
}
