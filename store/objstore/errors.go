package objstore

import (
	"errors"
	"fmt"
	"strings"

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

// maxErrText bounds the text of a Bucket's error: the cloud SDKs put an error answer's body
// into their error's text, and a server's body can be of any size, which the text would carry
// into every log line and activity failure that names the error.
const maxErrText = 4 << 10

// boundErrText returns err, or one whose text is err's cut at maxErrText (on a rune
// boundary) that still unwraps to err for errors.Is and errors.As.
func boundErrText(err error) error {
	msg := err.Error()
	if len(msg) <= maxErrText {
		return err
	}
	head := strings.ToValidUTF8(msg[:maxErrText], "")
	return &cutError{msg: fmt.Sprintf("%s… (cut, %d bytes in all)", head, len(msg)), err: err}
}

// cutError is an error whose text boundErrText cut.
type cutError struct {
	msg string
	err error
}

func (e *cutError) Error() string { return e.msg }
func (e *cutError) Unwrap() error { return e.err }
