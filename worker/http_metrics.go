package worker

import (
	"context"
	"fmt"
	"net/http"

	"github.com/walkeeper/walkeeper/store"
)

// The /metrics route: how many scrapes a worker renders at once.

// maxScrapes bounds the scrapes of /metrics being gathered and written at once: each holds
// every metric family and its text outside every byte budget, and without a token any local
// client can open --max-connections of them. Two Prometheus replicas and an operator's curl
// fit.
const maxScrapes = 4

// limitScrapes serves h, the /metrics handler, with at most maxScrapes requests in flight; a
// scrape that finds no slot within budgetWait is 503 budget_busy with Retry-After.
func (a *apiServer) limitScrapes(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), budgetWait)
		err := a.scrapes.Acquire(ctx, 1)
		cancel()
		if err != nil {
			if r.Context().Err() != nil {
				a.fail(w, r, r.Context().Err()) // the client went away while it waited
				return
			}
			a.fail(w, r, fmt.Errorf("%d scrapes of /metrics, the most a worker renders at once, have been in flight for longer than %s: %w",
				maxScrapes, budgetWait, store.ErrBudgetBusy))
			return
		}
		defer a.scrapes.Release(1)
		h.ServeHTTP(w, r)
	})
}
