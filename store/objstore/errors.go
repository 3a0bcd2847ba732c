package objstore

import (
	"errors"
	"fmt"

	"github.com/walkeeper/walkeeper/target"
)

// The errors a Bucket returns, wrapped with the operation and key and classified with
// errors.Is; package store re-exports them as its own.
var (
	// ErrNotFound: no object is stored under the key.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a put-if-absent lost to an existing object.
	ErrAlreadyExists = errors.New("already exists")
	// ErrInvalidInput: a malformed key, prefix, URL or limit; retrying never helps.
	ErrInvalidInput = target.ErrInvalidInput
	// ErrTooLarge: an object is longer than the caller said it may be (GetAtMost).
	ErrTooLarge = errors.New("object larger than the read limit")
	// ErrStalled: the storage made no progress on an operation for the bucket's stall
	// timeout (stall.go); the operation was abandoned and may be retried.
	ErrStalled = errors.New("storage stalled")
	// ErrClosed: the bucket was closed.
	ErrClosed = errors.New("closed")
)

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}
