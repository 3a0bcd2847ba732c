package store

import (
	"errors"
	"fmt"

	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/store/rowcodec"
	"github.com/walkeeper/walkeeper/target"
)

// The error taxonomy of the store: every error wraps at most one of these marks, so callers
// classify with errors.Is and never by text. activities/errors.go maps them onto Temporal and
// worker/httperr.go onto HTTP, each in one place.
var (
	// ErrNotFound: the store, row, object or manifest does not exist.
	ErrNotFound = objstore.ErrNotFound
	// ErrAlreadyExists: a create or put-if-absent lost to an existing object.
	ErrAlreadyExists = objstore.ErrAlreadyExists
	// ErrInvalidInput: the caller's input is malformed; retrying the same input never helps.
	// It is target.ErrInvalidInput, so a bad target parsed by package target carries it too.
	ErrInvalidInput = target.ErrInvalidInput
	// ErrStalePreparation: a prepared merge can never publish (RoundStale: the watermark moved
	// into its range, its staged files are gone, or its attempt was claimed "abort"); it must
	// be aborted and the merge prepared again.
	ErrStalePreparation = errors.New("stale preparation")
	// ErrConflict: a conditional write kept losing to concurrent writers; retry later.
	ErrConflict = errors.New("conflict")
	// ErrTooManyPending: too many pending generations: a read would union more than PendingMax
	// (in a shard or in total), a write would add to a shard at PendingMax, or a shard
	// manifest version would pass MaxManifestBytes; retry after merges catch up.
	ErrTooManyPending = errors.New("too many pending generations")
	// ErrCorrupt: stored bytes do not decode; retrying never helps, quarantine instead.
	ErrCorrupt = rowcodec.ErrCorrupt
	// ErrFenced: the shard's writer epoch moved past this writer's: another process with the
	// same instance id claimed the shard, or a WAL release (quarantine --release) fenced it.
	ErrFenced = errors.New("fenced")
	// ErrBudgetBusy: a memory bound refused more for now: a merge's or compaction's
	// reservation could not grow (or its allocations overdrew it), the read budget could not
	// admit a read's files in time or grow for them (read_bound.go), an append waited
	// appendBudgetWait for the append budget, or a writer's memtables hold unsealedFactor ×
	// MemtableBytes. Retry later; the text keeps "merge memory budget busy", which callers and
	// alerts already match.
	ErrBudgetBusy = errors.New("merge memory budget busy")
	// ErrStalled: a storage operation made no progress for Options.StorageStallTimeout and
	// was abandoned, or a WAL write landed too late to be acknowledged (walAckWindow); retrying
	// may succeed.
	ErrStalled = objstore.ErrStalled
	// ErrClosed: the handle was closed.
	ErrClosed = objstore.ErrClosed

	// Refinements of ErrInvalidInput: errors.Is matches both them and ErrInvalidInput, so a
	// caller that only knows ErrInvalidInput still treats them as bad input, and the HTTP
	// data plane gives them their own codes.

	// ErrKeyTooLong: a row key (or a List cursor) is longer than MaxKeyBytes.
	ErrKeyTooLong = rowcodec.ErrKeyTooLong
	// ErrAppendTooLarge: an append has more rows than Options.MaxAppendRows, or its decoded
	// rows are larger than Options.MemtableBytes. Nothing of it is written.
	ErrAppendTooLarge = fmt.Errorf("%w: append too large", ErrInvalidInput)

	// ErrSchemaMismatch: a create lost to a store of the name with another schema, one whose
	// create is unfinished included (store.json written, its registry entry not yet or never).
	// A refinement of ErrAlreadyExists, which errors.Is matches too.
	ErrSchemaMismatch = fmt.Errorf("%w with another schema", ErrAlreadyExists)
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
