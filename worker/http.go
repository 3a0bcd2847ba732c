package worker

import (
	"context"
	"crypto/sha256"
	"net"
	"net/http"

	"go.uber.org/zap"
	"golang.org/x/sync/semaphore"

	"github.com/walkeeper/walkeeper/store"
)

// apiServer is the HTTP data plane (docs/DESIGN.md §5).
type apiServer struct {
	db       *store.DB
	cfg      Config
	log      *zap.Logger
	metrics  *Metrics
	triggers *mergeTriggers // count trigger after a manual flush, debt trigger; its start (nil: HTTP-only mode) serves merge-wal
	token    [sha256.Size]byte
	guard    browserGuard
	mux      *http.ServeMux

	kicks kickLimiter // debt-triggered merge starts, at most one per debtKickEvery per store

	bodies *byteBudget // request bodies being read and decoded (--body-budget-bytes)
	pages  *byteBudget // list pages and single rows being read and written (--page-budget-bytes)
	// scrapes holds the /metrics scrapes in flight, at most maxScrapes (http_metrics.go).
	scrapes *semaphore.Weighted

	// stopping ends when the worker begins to stop: requests that only wait on Temporal
	// (merge-wal?wait=true) return at once instead of holding up the HTTP drain.
	stopping context.Context
	stop     context.CancelFunc
}

// newAPIServer builds the data plane of a worker whose listener has the address addr.
func newAPIServer(db *store.DB, cfg Config, addr net.Addr, log *zap.Logger, m *Metrics, trig *mergeTriggers) *apiServer {
	a := &apiServer{db: db, cfg: cfg, log: log, metrics: m, triggers: trig, mux: http.NewServeMux(),
		token: sha256.Sum256([]byte(cfg.AuthToken)),
		kicks: kickLimiter{every: debtKickEvery}, scrapes: semaphore.NewWeighted(maxScrapes),
		bodies: newByteBudget(cfg.BodyBudgetBytes, "body-budget-bytes", "request bodies being read"),
		pages:  newByteBudget(cfg.PageBudgetBytes, "page-budget-bytes", "list pages being written")}
	a.guard = newBrowserGuard(cfg.Listen, addr, cfg.AuthToken != "")
	a.stopping, a.stop = context.WithCancel(context.Background())
	route := func(pattern string, h http.Handler) {
		a.mux.Handle(pattern, h)
		// At 0 from the start, so a first panic shows as an increase; the series list the
		// routes, which http.ServeMux cannot (worker/api_doc_test.go checks docs/API.md by them).
		m.httpPanics.WithLabelValues(pattern)
	}
	m.httpPanics.WithLabelValues("unmatched")
	route("GET /healthz", http.HandlerFunc(a.healthz))
	route(metricsPattern, a.limitScrapes(m.Handler()))
	route("GET /api/v1/stores", a.handle(a.listStores))
	route("POST /api/v1/stores/{kind}/{name}", a.onTarget(a.createStore))
	route("POST /api/v1/stores/{kind}/{name}/rows", a.onTarget(a.appendRows))
	route("GET /api/v1/stores/{kind}/{name}/rows", a.onStore(a.listRows))
	route("GET /api/v1/stores/{kind}/{name}/rows/{id}", a.onStore(a.getRow))
	route("DELETE /api/v1/stores/{kind}/{name}/rows/{id}", a.onStore(a.deleteRow))
	route("POST /api/v1/stores/{kind}/{name}/flush", a.onStore(a.flush))
	route("POST /api/v1/stores/{kind}/{name}/merge-wal", a.onTarget(a.mergeWal))
	route("GET /api/v1/stores/{kind}/{name}/stats", a.onStore(a.stats))
	return a
}

func (a *apiServer) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "shard": a.db.Shard()})
}

// unknownKind is the 400 for a kind (path or ?kind=) that names no store kind.
func unknownKind(s string) *apiError {
	return newAPIError(http.StatusBadRequest, CodeUnknownKind, "unknown store kind %q (want rollout, generic or datagen)", clipText(s))
}

// handle serves a route whose handler returns its error answer.
func (a *apiServer) handle(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			a.fail(w, r, err)
		}
	}
}

// onTarget serves a route of the store named by {kind} and {name} (unknown_kind /
// invalid_name on bad input) by h, which returns its error answer.
func (a *apiServer) onTarget(h func(w http.ResponseWriter, r *http.Request, t store.Target) error) http.HandlerFunc {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		k, err := store.ParseKind(r.PathValue("kind"))
		if err != nil {
			return unknownKind(r.PathValue("kind"))
		}
		name := r.PathValue("name")
		if err := store.ValidateName(name); err != nil {
			return &apiError{Status: http.StatusBadRequest, Code: CodeInvalidName, Message: err.Error()}
		}
		t := store.Target{Kind: k, Name: name}
		infoFrom(r.Context()).target = t.String()
		return h(w, r, t)
	})
}

// onStore serves a route of one existing store (store_not_found otherwise) by h, which
// returns its error answer.
func (a *apiServer) onStore(h func(w http.ResponseWriter, r *http.Request, s *store.Store) error) http.HandlerFunc {
	return a.onTarget(func(w http.ResponseWriter, r *http.Request, t store.Target) error {
		s, err := a.db.Open(r.Context(), t)
		if err != nil {
			return notFoundAs(err, CodeStoreNotFound)
		}
		return h(w, r, s)
	})
}
