package worker

import (
	"cmp"
	"fmt"
	"net/http"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store"
)

// A panic in a request's middleware or handler is answered 500 internal in JSON, like any
// other failure; the handlers' defers release its budgets as it unwinds.

// serveRecovering routes and serves r and recovers a panic of either; route is the pattern
// served ("unmatched": none), and abort is set when the status was already sent.
func (a *apiServer) serveRecovering(w *statusWriter, r *http.Request) (route string, abort bool) {
	route = "unmatched"
	defer func() {
		if v := recover(); v != nil {
			abort = a.recovered(w, r, route, v)
		}
	}()
	h, pattern := a.mux.Handler(r)
	route = cmp.Or(pattern, "unmatched")
	a.serve(w, r, h, pattern)
	return route, false
}

// recovered answers, logs and counts the panic v of a request of route, and reports whether
// the connection must be aborted instead (its status is already sent).
func (a *apiServer) recovered(w *statusWriter, r *http.Request, route string, v any) (abort bool) {
	if v == http.ErrAbortHandler { // a handler's own way to drop the connection, not a bug
		return true
	}
	a.metrics.httpPanics.WithLabelValues(route).Inc()
	ri := infoFrom(r.Context())
	abort = w.status != 0
	if abort {
		ri.id = newRequestID()
		ri.code, ri.err = CodeInternal, "the handler panicked after its answer began; connection aborted"
	} else {
		clear(w.Header()) // whatever the handler set was meant for another answer
		answer(w, r, newAPIError(http.StatusInternalServerError, CodeInternal, "handler panicked"))
	}
	stack := zap.Stack("stack")
	if pe, ok := v.(*store.PanicError); ok { // the stack that panicked is the store goroutine's
		stack = zap.ByteString("stack", pe.Stack)
	}
	// The panic's text may hold what the request sent: it is clipped like any echoed text.
	a.log.Error("handler panicked", zap.String("method", clipText(r.Method)), zap.String("route", route),
		zap.String("target", ri.target), zap.String("request_id", ri.id), zap.Bool("aborted", abort),
		zap.String("panic", clipText(fmt.Sprint(v))), stack)
	return abort
}
