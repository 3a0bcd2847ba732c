package objstore

import "errors"

// The reasons RefusedAnswer gives for an answer of the storage walkeeper refused: one no S3,
// GCS or Azure server sends, so a server or a proxy in front of it is misbehaving.
const (
	// RefusedMalformedListing: a listing page out of its prefix or order, without a field
	// every such server sends, with more entries than asked for, or one of more than
	// maxEmptyListPages empty pages in a row.
	RefusedMalformedListing = "malformed_listing"
	// RefusedMalformedResponse: any other answer the storage driver failed on.
	RefusedMalformedResponse = "malformed_response"
	// RefusedTooLarge: an answer's body (an error's, a listing page's, a put's) past its
	// limit; never an object's bytes, whose limit is the caller's (ErrTooLarge).
	RefusedTooLarge = "too_large"
	// RefusedAccess: GCS answered 403, which it sends only to a caller not allowed to see
	// whether the object exists.
	RefusedAccess = "access_refused"
)

// RefusedReasons returns every reason RefusedAnswer gives, so a counter can start each at 0.
func RefusedReasons() []string {
	return []string{RefusedMalformedListing, RefusedMalformedResponse, RefusedTooLarge, RefusedAccess}
}

// RefusedAnswer reports whether err is a Bucket's failure on an answer of the storage
// walkeeper refused, and the reason; the first of too_large, access_refused,
// malformed_listing and malformed_response that err holds, since a too-large listing page is
// a listing too.
func RefusedAnswer(err error) (string, bool) {
	switch {
	case errors.As(err, new(answerTooLarge)):
		return RefusedTooLarge, true
	case errors.Is(err, errAccessRefused):
		return RefusedAccess, true
	case errors.Is(err, errBadListing):
		return RefusedMalformedListing, true
	case errors.Is(err, errBadAnswer):
		return RefusedMalformedResponse, true
	}
	return "", false
}

// WithRefusedAnswers returns a view of the same bucket that calls refused with the reason
// (RefusedAnswer) of each of its operations that fails on a refused answer, once per
// operation: an operation whose caller's code (a listing's callback, a streamed put's writer)
// returns the refusal of a nested operation that already heard of it does not call it again.
// The view keeps b's faults and stall timeout; refused must be safe for concurrent use.
func (b *Bucket) WithRefusedAnswers(refused func(reason string)) *Bucket {
	if b == nil {
		return nil
	}
	return &Bucket{core: b.core, faults: b.faults, stall: b.stall, refused: refused}
}

// heardRefusal is a refused answer's error a view's refused func has heard of.
type heardRefusal struct{ err error }

func (e *heardRefusal) Error() string { return e.err.Error() }
func (e *heardRefusal) Unwrap() error { return e.err }

// tellRefused calls b.refused with the reason of err, an operation's error, unless err is no
// refused answer or one already told, and returns err marked as told.
func (b *Bucket) tellRefused(err error) error {
	if b.refused == nil || errors.As(err, new(*heardRefusal)) {
		return err
	}
	reason, ok := RefusedAnswer(err)
	if !ok {
		return err
	}
	b.refused(reason)
	return &heardRefusal{err}
}
