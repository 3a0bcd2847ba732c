package worker

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/prometheus/common/model"

	"github.com/walkeeper/walkeeper/store"
)

// The /metrics route: how many scrapes a worker renders at once, and which series one asks for.

const (
	// metricsPattern is the route of the Prometheus exposition.
	metricsPattern = "GET /metrics"
	// metricNamesParam is promhttp's filter: a scrape with name[] gets only the families it
	// names, the union of its values, as Prometheus federation repeats its parameters.
	metricNamesParam = "name[]"
	// maxMetricNames bounds the names one scrape may filter on.
	maxMetricNames = 64
)

// maxScrapes bounds the /metrics scrapes in flight, each holding every family's text outside
// every byte budget; two Prometheus replicas and an operator's curl fit.
const maxScrapes = 4

// limitScrapes serves h, the /metrics handler, with at most maxScrapes requests in flight; a
// scrape that finds no slot within budgetWait is 503 budget_busy with Retry-After.
func (a *apiServer) limitScrapes(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), budgetWait)
		err := a.scrapes.Acquire(ctx, 1)
		cancel()
		if err != nil {
			if err = r.Context().Err(); err == nil { // else the client went away while it waited
				err = fmt.Errorf("%d scrapes of /metrics, the most a worker renders at once, have been in flight for longer than %s: %w",
					maxScrapes, budgetWait, store.ErrBudgetBusy)
			}
			a.fail(w, r, err)
			return
		}
		defer a.scrapes.Release(1)
		h.ServeHTTP(w, r)
	})
}

// checkMetricsQuery refuses a /metrics filter of more than maxMetricNames names, or with a
// value that is no metric name and so could match nothing.
func checkMetricsQuery(q url.Values) *apiError {
	names := q[metricNamesParam]
	if len(names) > maxMetricNames {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "%s is given %d times; a scrape filters on at most %d names",
			metricNamesParam, len(names), maxMetricNames)
	}
	for _, n := range names {
		if !model.LegacyValidation.IsValidMetricName(n) {
			return newAPIError(http.StatusBadRequest, CodeInvalidInput, "%s %q is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)",
				metricNamesParam, clipText(n))
		}
	}
	return nil
}
