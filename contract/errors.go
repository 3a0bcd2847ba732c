package contract

import (
	"errors"
	"slices"

	"go.temporal.io/sdk/temporal"
)

// Application error types: the error vocabulary that crosses Temporal, mapped from store
// marks in activities/errors.go alone; workflows branch on them, never on messages.
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
	// ErrTypeStoreNotFound: the target names no registered store. Its message is
	// MissingStoreMessage, one line that says how to create the store.
	ErrTypeStoreNotFound = "StoreNotFound"
	// Fleet-wide maintenance that cannot finish fails non-retryable, visibly instead of
	// retrying silently for ever. ErrTypeSweepListFailed: listing the demand index failed
	// after the activity's retries.
	ErrTypeSweepListFailed = "SweepListFailed"
	// ErrTypeReconcileFailed: a registry page could not be listed after its retries.
	ErrTypeReconcileFailed = "ReconcileFailed"
	// ErrTypePayloadTooLarge: an activity result would pass the payload limit
	// (MaxPayloadBytes); retrying returns the same result.
	ErrTypePayloadTooLarge = "PayloadTooLarge"
)

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

// PermanentError reports whether retrying err cannot help: a non-retryable application error,
// or one of NonRetryableErrorTypes. Pure.
func PermanentError(err error) bool {
	appErr, ok := errors.AsType[*temporal.ApplicationError](err)
	return ok && (appErr.NonRetryable() || slices.Contains(NonRetryableErrorTypes, appErr.Type()))
}
