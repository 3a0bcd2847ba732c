package store

import (
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/target"
)

// A panic in a goroutine the store starts on a caller's behalf would end the whole process,
// so each such goroutine recovers: the panic is logged with its stack, counted, and handed to
// the caller as a *PanicError, which is unmarked and so an internal failure everywhere.

// PanicError is a panic recovered in a goroutine the store started. The HTTP data plane
// re-raises it in the request's goroutine, so it is answered and counted as a handler panic.
type PanicError struct {
	Where string // what the goroutine was doing
	Value any    // what it panicked with
	Stack []byte // the panicking goroutine's stack
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("internal error: %s panicked: %v", e.Where, e.Value)
}

// recoveredPanics counts the panics recovered by any DB of the process.
var recoveredPanics atomic.Int64

// RecoveredPanics is how many panics the store's goroutines recovered in this process: the
// worker exports it, and tests fail when it grows without a panic they injected.
func RecoveredPanics() int64 { return recoveredPanics.Load() }

// recoverPanic, deferred by a goroutine the store started, turns its panic into a *PanicError
// in *errp (when errp is not nil), logged once with the stack and counted.
// recover must be called by the deferred function itself, so recoverPanic is deferred as is.
func (db *DB) recoverPanic(where string, errp *error) {
	if v := recover(); v != nil {
		pe := logPanic(db.log, where, v)
		if errp != nil {
			*errp = pe
		}
	}
}

// RecoverTo, deferred as is by a goroutine outside the store that runs store or Temporal
// calls (an activity's, the worker's flush sweeper's), does for it what the store does for
// its own: the panic is logged with log, counted, and set in *errp.
func RecoverTo(log *zap.Logger, where string, errp *error) {
	if v := recover(); v != nil {
		*errp = logPanic(log, where, v)
	}
}

// logPanic counts the panic v of a goroutine doing where and logs it with that goroutine's
// stack, once: the line "goroutine panicked" is what the alert's runbook points at. Call it
// from the deferred function that recovered v, whose goroutine's stack it records.
func logPanic(log *zap.Logger, where string, v any) *PanicError {
	recoveredPanics.Add(1)
	pe := &PanicError{Where: where, Value: v, Stack: debug.Stack()}
	log.Error("goroutine panicked", zap.String("where", where),
		zap.String("panic", target.Clip(fmt.Sprint(v))), zap.ByteString("stack", pe.Stack)) // the value may quote a key
	return pe
}

// guard is fn for an errgroup: a panic of fn is its *PanicError.
func (db *DB) guard(where string, fn func() error) func() error {
	return func() (err error) {
		defer db.recoverPanic(where, &err)
		return fn()
	}
}
