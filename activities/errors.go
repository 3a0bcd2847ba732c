package activities

import (
	"context"
	"errors"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// This file is the one place where store error marks become Temporal error types, which
// workflows branch on and every retry policy lists (contract.NonRetryableErrorTypes).

type errorClass struct {
	mark         error
	errType      string
	nonRetryable bool
	// benign failures are expected in normal operation: Temporal keeps them out of error
	// logs and failure metrics.
	benign bool
}

// classes are checked in order, so an error carrying several marks takes the first:
// everything that halts comes before everything that retries.
var classes = []errorClass{
	{store.ErrCorrupt, contract.ErrTypeCorruptData, true, false},
	// Also its refinements ErrKeyTooLong and ErrAppendTooLarge (errors.Is matches both).
	{store.ErrInvalidInput, contract.ErrTypeInvalidInput, true, false},
	{store.ErrNotFound, contract.ErrTypeNotFound, true, false},
	// The workflow handles it: abort the preparation, then prepare again.
	{store.ErrStalePreparation, contract.ErrTypeStalePreparation, true, true},
	{store.ErrConflict, contract.ErrTypeConflict, false, false},
	{store.ErrBudgetBusy, contract.ErrTypeBudgetBusy, false, true},
	{store.ErrFenced, contract.ErrTypeFenced, false, false},
	{store.ErrTooManyPending, contract.ErrTypeTooManyPending, false, false},
	{store.ErrAlreadyExists, contract.ErrTypeAlreadyExists, false, false},
	{store.ErrClosed, contract.ErrTypeClosed, false, false},
}

// ToTemporal maps a store error onto a Temporal application error whose type names the mark
// and whose retryability follows it, keeping it as the cause for errors.Is; context and
// Temporal errors pass through, unmarked ones become retryable "Internal" errors.
func ToTemporal(err error) error {
	if err == nil {
		return nil
	}
	if errors.As(err, new(*temporal.ApplicationError)) || errors.As(err, new(*temporal.CanceledError)) {
		return err
	}
	if errors.Is(err, errWorkerStopping) {
		return temporal.NewApplicationErrorWithOptions(err.Error(), contract.ErrTypeClosed,
			temporal.ApplicationErrorOptions{Cause: err, Category: temporal.ApplicationErrorCategoryBenign})
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	c := classify(err)
	opts := temporal.ApplicationErrorOptions{NonRetryable: c.nonRetryable, Cause: err}
	if c.benign {
		opts.Category = temporal.ApplicationErrorCategoryBenign
	}
	return temporal.NewApplicationErrorWithOptions(err.Error(), c.errType, opts)
}

// ErrorType is the Temporal error type err maps to ("" for nil): ToTemporal's, or "Canceled"
// and "Timeout" for the context errors it passes through.
func ErrorType(err error) string {
	var appErr *temporal.ApplicationError
	switch {
	case err == nil:
		return ""
	case errors.As(ToTemporal(err), &appErr):
		return appErr.Type()
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "Timeout"
	}
	return classify(err).errType
}

func classify(err error) errorClass {
	for _, c := range classes {
		if errors.Is(err, c.mark) {
			return c
		}
	}
	// The Temporal frontend's refusals that no retry changes: a request it rejects, a
	// namespace it does not know, a caller it does not admit. Busy and unavailable retry.
	switch {
	case errors.As(err, new(*serviceerror.InvalidArgument)):
		return errorClass{errType: contract.ErrTypeInvalidInput, nonRetryable: true}
	case errors.As(err, new(*serviceerror.NamespaceNotFound)), errors.As(err, new(*serviceerror.PermissionDenied)):
		return errorClass{errType: contract.ErrTypeMisconfigured, nonRetryable: true}
	case errors.Is(err, contract.ErrWorkflowIDTaken):
		// Held until someone ends the other workflow: the next sweep round or trigger backoff
		// asks again, not an activity retry seconds later.
		return errorClass{errType: contract.ErrTypeStartFailed, nonRetryable: true}
	}
	return errorClass{errType: contract.ErrTypeInternal}
}

// RefusedForGood reports whether err is a refusal that no retry changes (non-retryable once
// ToTemporal has mapped it): a caller outside an activity backs off instead of retrying it.
func RefusedForGood(err error) bool { return err != nil && contract.PermanentError(ToTemporal(err)) }

// errMisconfigured reports a worker wired without a dependency; retrying cannot help.
func errMisconfigured(msg string) error {
	return temporal.NewNonRetryableApplicationError(msg, contract.ErrTypeMisconfigured, nil)
}

// errStoreNotFound reports that t names no registered store in the one line every surface uses
// (contract.MissingStoreMessage), non-retryable: a store does not appear by retrying.
func errStoreNotFound(t store.Target) error {
	return temporal.NewNonRetryableApplicationError(contract.MissingStoreMessage(t, ""), contract.ErrTypeStoreNotFound, nil)
}
