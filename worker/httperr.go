package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// Stable error codes of the HTTP data plane. Clients switch on these, never on the message.
// Adding a code is fine; renaming one breaks clients.
const (
	CodeInvalidJSON          = "invalid_json"           // 400: body is not JSON
	CodeInvalidInput         = "invalid_input"          // 400: JSON is fine, content is not (bad rows, bad schema, bad query)
	CodeUnknownKind          = "unknown_kind"           // 400: kind is not rollout, generic or datagen
	CodeInvalidName          = "invalid_name"           // 400: store name fails the name rule, or a "." / ".." path segment
	CodeKeyTooLong           = "key_too_long"           // 400: a row key (or after cursor) longer than store.MaxKeyBytes
	CodeUnauthorized         = "unauthorized"           // 401: bearer token missing or wrong
	CodeCrossOrigin          = "cross_origin"           // 403: a browser's state-changing request from another origin, to a worker without a token
	CodeHostNotAllowed       = "host_not_allowed"       // 403: a Host that is not a loopback name, on a worker listening on loopback
	CodeNotFound             = "not_found"              // 404: no such route (or object)
	CodeStoreNotFound        = "store_not_found"        // 404: the store does not exist
	CodeRowNotFound          = "row_not_found"          // 404: the row does not exist (or is deleted)
	CodeMethodNotAllowed     = "method_not_allowed"     // 405: the route exists with other methods (see Allow)
	CodeAlreadyExists        = "already_exists"         // 409: the store exists with the same schema
	CodeSchemaMismatch       = "schema_mismatch"        // 409: the store exists with another schema
	CodeConflict             = "conflict"               // 409: lost a conditional write repeatedly; retry
	CodeBodyTooLarge         = "body_too_large"         // 413: body over --max-body-bytes
	CodeAppendTooLarge       = "append_too_large"       // 413: more rows than --max-append-rows, or decoded rows over --memtable-bytes
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: a body that is not application/json
	CodeCanceled             = "canceled"               // 499: the client went away
	CodeInternal             = "internal"               // 500: a bug or an unexpected storage error; never bad input
	CodeCorrupt              = "corrupt"                // 500: stored bytes do not decode
	CodeMergeFailed          = "merge_failed"           // 500: the MergeWal workflow (waited for) failed
	CodeMergeStopped         = "merge_stopped"          // 409: the MergeWal workflow (waited for) was cancelled or terminated
	CodeMergeTimedOut        = "merge_timed_out"        // 504: the MergeWal workflow (waited for) ran past its run timeout
	CodeWorkflowIDTaken      = "workflow_id_taken"      // 409: a workflow of another type runs under the store's merge ID
	CodeTooManyPending       = "too_many_pending"       // 503 + Retry-After: pending-generation debt too high
	CodeBudgetBusy           = "budget_busy"            // 503 + Retry-After: a memory budget (merge, read, append, body, page) or the /metrics slots stayed full
	CodeFenced               = "fenced"                 // 503: another process took this shard (same instance id)
	CodeShuttingDown         = "shutting_down"          // 503: the worker is stopping
	CodeTemporalUnavailable  = "temporal_unavailable"   // 503: no Temporal client, or Temporal unreachable
	CodeTemporalMisconfig    = "temporal_misconfigured" // 503: Temporal refuses the start for good (a search attribute missing)
	CodeTimeout              = "timeout"                // 504: the operation ran out of time
)

// StatusClientClosedRequest is the (nginx) status logged when the client disconnected.
const StatusClientClosedRequest = 499

// retryAfterDebt is the Retry-After advertised when a shard is over its pending debt.
const retryAfterDebt = 10 * time.Second

// apiError is an error with its HTTP status and stable code.
type apiError struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
	Extra      map[string]any // extra fields in the JSON body
	Cause      error          // logged, never answered
}

func (e *apiError) Error() string {
	if e.Cause != nil {
		return e.Code + ": " + e.Message + ": " + e.Cause.Error()
	}
	return e.Code + ": " + e.Message
}

func newAPIError(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// errorAnswers map store marks and context errors to their answers, checked in order: the
// refinements of ErrInvalidInput and ErrAlreadyExists before them.
var errorAnswers = []struct {
	mark       error
	status     int
	code       string
	retryAfter time.Duration
}{
	{store.ErrKeyTooLong, http.StatusBadRequest, CodeKeyTooLong, 0},
	{store.ErrAppendTooLarge, http.StatusRequestEntityTooLarge, CodeAppendTooLarge, 0},
	{store.ErrInvalidInput, http.StatusBadRequest, CodeInvalidInput, 0},
	{store.ErrNotFound, http.StatusNotFound, CodeNotFound, 0},
	{store.ErrSchemaMismatch, http.StatusConflict, CodeSchemaMismatch, 0},
	{store.ErrAlreadyExists, http.StatusConflict, CodeAlreadyExists, 0},
	{store.ErrTooManyPending, http.StatusServiceUnavailable, CodeTooManyPending, retryAfterDebt},
	{store.ErrConflict, http.StatusConflict, CodeConflict, time.Second},
	{store.ErrStalePreparation, http.StatusConflict, CodeConflict, time.Second},
	{store.ErrBudgetBusy, http.StatusServiceUnavailable, CodeBudgetBusy, 5 * time.Second},
	{store.ErrFenced, http.StatusServiceUnavailable, CodeFenced, 0},
	{store.ErrClosed, http.StatusServiceUnavailable, CodeShuttingDown, time.Second},
	{store.ErrCorrupt, http.StatusInternalServerError, CodeCorrupt, 0},
	{context.Canceled, StatusClientClosedRequest, CodeCanceled, 0},
	{context.DeadlineExceeded, http.StatusGatewayTimeout, CodeTimeout, 0},
	{store.ErrStalled, http.StatusGatewayTimeout, CodeTimeout, 0},
}

// classify is the one place mapping errors to an HTTP status and code. It runs in the
// request's goroutine, so it raises again a panic the store recovered in a goroutine of its
// own, which serveRecovering then answers, logs and counts as the handler's.
func classify(err error) *apiError {
	if pe, ok := errors.AsType[*store.PanicError](err); ok {
		panic(pe)
	}
	if ae, ok := errors.AsType[*apiError](err); ok {
		return ae
	}
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Code: CodeBodyTooLarge,
			Message: fmt.Sprintf("request body is larger than %d bytes", mbe.Limit)}
	}
	for _, a := range errorAnswers {
		if errors.Is(err, a.mark) {
			return &apiError{Status: a.status, Code: a.code, Message: err.Error(), RetryAfter: a.retryAfter}
		}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: CodeInternal, Message: err.Error()}
}

// notFoundAs classifies err, naming a not-found more precisely (store_not_found, row_not_found).
func notFoundAs(err error, code string) *apiError {
	ae := classify(err)
	if ae.Code == CodeNotFound && errors.Is(err, store.ErrNotFound) {
		c := *ae
		c.Code = code
		return &c
	}
	return ae
}

// classifyTemporal maps an error from starting a workflow: unreachable or unknown namespace is
// temporal_unavailable; a start the namespace refuses as invalid or not permitted is
// temporal_misconfigured, since walkeeper's starts are valid in a namespace set up for it;
// store marks keep their mapping; anything else is internal.
func classifyTemporal(err error) *apiError {
	if errors.As(err, new(*serviceerror.Unavailable)) || errors.As(err, new(*serviceerror.DeadlineExceeded)) ||
		errors.As(err, new(*serviceerror.NamespaceNotFound)) || errors.As(err, new(*serviceerror.NamespaceNotActive)) ||
		errors.As(err, new(*serviceerror.ResourceExhausted)) {
		return &apiError{Status: http.StatusServiceUnavailable, Code: CodeTemporalUnavailable, Message: err.Error(), RetryAfter: 5 * time.Second}
	}
	if errors.As(err, new(*serviceerror.InvalidArgument)) || errors.As(err, new(*serviceerror.PermissionDenied)) {
		return &apiError{Status: http.StatusServiceUnavailable, Code: CodeTemporalMisconfig,
			Message: "Temporal refused the start; fix the namespace walkeeper uses: " + err.Error()}
	}
	if errors.Is(err, contract.ErrWorkflowIDTaken) {
		return &apiError{Status: http.StatusConflict, Code: CodeWorkflowIDTaken, Message: err.Error()}
	}
	return classify(err)
}

// writeAPIError writes {"error": ..., "code": ...} (plus extras), the status and Retry-After.
func writeAPIError(w http.ResponseWriter, ae *apiError) {
	if ae.RetryAfter > 0 {
		secs := int((ae.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	if ae.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="walkeeper"`)
	}
	body := make(map[string]any, 2+len(ae.Extra))
	maps.Copy(body, ae.Extra)
	body["error"] = ae.Message
	body["code"] = ae.Code
	writeJSON(w, ae.Status, body)
}

// maxEchoedText bounds client-supplied text (a path, a query value, a header, a member name)
// quoted in an error message or a log line: a 60 KiB URL must not become a 60 KiB log line.
const maxEchoedText = 256

// clipText is s cut to maxEchoedText bytes at a character boundary, marked with its length
// when it was cut.
func clipText(s string) string {
	if len(s) <= maxEchoedText {
		return s
	}
	return contract.Clip(s, maxEchoedText) + "[clipped, " + strconv.Itoa(len(s)) + " bytes]"
}
