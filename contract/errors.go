package contract

import "strings"

// Application error types: the error vocabulary that crosses Temporal. Activities map store
// error marks onto them in one place (activities/errors.go, the only file that knows both
// sides); workflows branch on them, never on messages, and list the non-retryable ones in
// every retry policy.
const (
	ErrTypeInvalidInput     = "InvalidInput"
	ErrTypeCorruptData      = "CorruptData"
	ErrTypeNotFound         = "NotFound"
	ErrTypeStalePreparation = "StalePreparation"
	ErrTypeConflict         = "Conflict"
	ErrTypeBudgetBusy       = "BudgetBusy"
	ErrTypeFenced           = "Fenced"
	ErrTypeTooManyPending   = "TooManyPending"
	ErrTypeAlreadyExists    = "AlreadyExists"
	ErrTypeClosed           = "Closed"
	ErrTypeInternal         = "Internal"
	ErrTypeMisconfigured    = "Misconfigured"
	ErrTypeStartFailed      = "StartFailed"
	ErrTypeAllShardsFailed  = "AllShardsFailed"
	ErrTypeScanFailed       = "ScanFailed"
	// ErrTypeStoreNotFound: the target names no registered store. Its message is
	// StoreNotFoundMessage, one line that says how to create the store.
	ErrTypeStoreNotFound = "StoreNotFound"
)

// StoreNotFoundMessage is what every walkeeper surface says about a target that names no
// store: "store generic:nope does not exist; create it with POST /api/v1/stores/generic/nope".
// target is "<kind>:<name>".
func StoreNotFoundMessage(target string) string {
	path := target
	if i := strings.IndexByte(target, ':'); i >= 0 {
		path = target[:i] + "/" + target[i+1:]
	}
	return "store " + target + " does not exist; create it with POST /api/v1/stores/" + path
}

// NonRetryableErrorTypes are never retried by an activity retry policy: retrying the same
// input cannot help. StalePreparation is handled by the workflow (abort, then prepare again).
var NonRetryableErrorTypes = []string{
	ErrTypeInvalidInput,
	ErrTypeCorruptData,
	ErrTypeNotFound,
	ErrTypeStoreNotFound,
	ErrTypeStalePreparation,
	ErrTypeMisconfigured,
}
