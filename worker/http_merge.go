package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// Handlers of the maintenance routes: flush (seal) and merge-wal.

type flushResponse struct {
	Target     string  `json:"target"`
	Sealed     bool    `json:"sealed"`
	Generation *uint64 `json:"generation"`
	Rows       int     `json:"rows"`
	Pending    int     `json:"pending"`
}

func (a *apiServer) flush(w http.ResponseWriter, r *http.Request, s *store.Store) error {
	res, err := s.Flush(r.Context())
	if err != nil {
		return err
	}
	// The count trigger rides a manual seal too; its failure never fails the flush.
	a.triggers.afterFlush(s.Target(), res)
	out := flushResponse{Target: s.Target().String(), Sealed: res.Sealed, Rows: res.Rows, Pending: res.Pending}
	if res.Sealed {
		out.Generation = &res.Generation
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// mergeRequest is the optional body of POST .../merge-wal.
type mergeRequest struct {
	MaxGenerations  *int   `json:"max_generations,omitempty"`
	MaxBytes        *int64 `json:"max_bytes,omitempty"`
	ParallelPrepare bool   `json:"parallel_prepare,omitempty"`
	MaxPasses       int    `json:"max_passes,omitempty"`
}

func (a *apiServer) mergeWal(w http.ResponseWriter, r *http.Request, t store.Target) error {
	wait := false
	if ws := r.URL.Query().Get("wait"); ws != "" {
		var err error
		if wait, err = strconv.ParseBool(ws); err != nil {
			return newAPIError(http.StatusBadRequest, CodeInvalidInput, "wait %q is not a boolean", clipText(ws))
		}
	}
	var req mergeRequest
	if err := a.decodeJSONBody(w, r, true, &req); err != nil {
		return err
	}
	if (req.MaxGenerations != nil && *req.MaxGenerations < 0) || (req.MaxBytes != nil && *req.MaxBytes < 0) || req.MaxPasses < 0 {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "merge knobs must not be negative")
	}
	in := contract.MergeWalInput{Target: t.String(), MaxGenerations: req.MaxGenerations, MaxBytes: req.MaxBytes,
		ParallelPrepare: req.ParallelPrepare, MaxPasses: req.MaxPasses,
		Trigger: contract.TriggerHTTP, TriggerReason: r.Method + " " + r.URL.Path}
	// The start would refuse knobs past MergeWal's bounds too, but counted as a failed start,
	// which alerts that Temporal is unreachable: a client's mistake must not.
	if err := in.Validate(); err != nil {
		return err
	}
	if a.triggers.start == nil {
		return &apiError{Status: http.StatusServiceUnavailable, Code: CodeTemporalUnavailable,
			Message: "this worker runs without Temporal (HTTP-only mode); merges run only through Temporal"}
	}
	if _, err := a.db.Open(r.Context(), t); err != nil {
		return notFoundAs(err, CodeStoreNotFound)
	}
	run, err := a.triggers.start(r.Context(), t, in)
	a.metrics.trigger(TriggerHTTP, err)
	if err != nil {
		return classifyTemporal(err)
	}
	out := map[string]any{"workflow_id": run.GetID(), "run_id": run.GetRunID()}
	if !wait {
		writeJSON(w, http.StatusAccepted, out)
		return nil
	}
	// Waiting never holds up shutdown: the workflow keeps running in Temporal either way.
	wctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(a.stopping, cancel)()
	var res contract.MergeWalResult
	err = run.Get(wctx, &res)
	// The wait outlasts the write deadline the server set when it read the request: the
	// answer gets a fresh --http-write-timeout from now (the read deadline needs no such
	// care, net/http clears it once the body is consumed).
	if a.cfg.HTTPWriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(a.cfg.HTTPWriteTimeout)) // unsupported under httptest
	}
	if err != nil {
		if a.stopping.Err() != nil {
			return &apiError{Status: http.StatusServiceUnavailable, Code: CodeShuttingDown, Extra: out,
				Message: fmt.Sprintf("worker is stopping; MergeWal %s keeps running in Temporal", run.GetID())}
		}
		if r.Context().Err() != nil {
			return r.Context().Err()
		}
		if early := mergeEndedEarly(run.GetID(), err, out); early != nil {
			return early
		}
		return &apiError{Status: http.StatusInternalServerError, Code: CodeMergeFailed,
			Message: fmt.Sprintf("MergeWal %s failed", run.GetID()), Extra: out, Cause: err}
	}
	out["result"] = res
	writeJSON(w, http.StatusOK, out)
	return nil
}

// mergeEndedEarly is the answer for a MergeWal run that ended unfinished without failing,
// stopped by an operator or its run timeout (what it committed stays); nil for any other
// error. Only how the run itself ended counts, not an activity's or child's cancel.
func mergeEndedEarly(id string, err error, ids map[string]any) *apiError {
	if errors.As(err, new(*temporal.ActivityError)) || errors.As(err, new(*temporal.ChildWorkflowExecutionError)) {
		return nil
	}
	status, code, how := http.StatusConflict, CodeMergeStopped, ""
	switch {
	case errors.As(err, new(*temporal.CanceledError)):
		how = "was cancelled before it finished"
	case errors.As(err, new(*temporal.TerminatedError)):
		how = "was terminated before it finished (temporal workflow terminate, or a reset replaced the run)"
	case errors.As(err, new(*temporal.TimeoutError)):
		status, code, how = http.StatusGatewayTimeout, CodeMergeTimedOut, "ran past its run timeout (--merge-run-timeout) and Temporal ended it"
	default:
		return nil
	}
	return &apiError{Status: status, Code: code, Extra: ids, Cause: err,
		Message: fmt.Sprintf("MergeWal %s %s; the passes it committed stay, the rest stays pending until the next merge", id, how)}
}
