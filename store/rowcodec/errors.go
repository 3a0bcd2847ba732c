package rowcodec

import (
	"errors"
	"fmt"

	"github.com/walkeeper/walkeeper/target"
)

// The errors the codec returns, classified with errors.Is; package store re-exports them.
var (
	// ErrInvalidInput: rows or a schema the caller gave are malformed (target.ErrInvalidInput).
	ErrInvalidInput = target.ErrInvalidInput
	// ErrCorrupt: stored bytes do not decode or do not match the schema.
	ErrCorrupt = errors.New("corrupt data")
	// ErrKeyTooLong: a row key (or a List cursor) is longer than MaxKeyBytes. It refines
	// ErrInvalidInput: errors.Is matches both.
	ErrKeyTooLong = fmt.Errorf("%w: key too long", ErrInvalidInput)
)

// MaxKeyBytes is the longest row key every path accepts (ErrKeyTooLong); not a knob, so that
// stored keys stay readable by every process.
const MaxKeyBytes = 1024

// CheckRowKey refuses a row key longer than MaxKeyBytes; what names it in the error.
func CheckRowKey(what, key string) error {
	if len(key) > MaxKeyBytes {
		return fmt.Errorf("%w: %s is %d bytes, more than the limit of %d", ErrKeyTooLong, what, len(key), MaxKeyBytes)
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
