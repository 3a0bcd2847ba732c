package contract

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/walkeeper/walkeeper/target"
)

// Workflow inputs come from anyone with access to the namespace, so every field of every
// input has bounds on both sides, checked by a pure Validate (validate_*.go) before a workflow
// does anything. A field out of bounds is an input error naming the field by its JSON name,
// wrapping target.ErrInvalidInput so that every layer maps it as any invalid input. A Validate
// reports the first bad field in field order (cmp.Or of the checks), so a message names one.

// inputError is one workflow input field outside its bounds. Its message is
// "invalid input: <field>: <problem>", e.g. "invalid input: interval: 1ns is below the floor 1s".
// It is not a wire type: a workflow fails with its message (workflows/input.go).
type inputError struct {
	// Field is the JSON name of the field, dotted and indexed for nested fields
	// ("sweep.concurrency", "carry.shards[2].shard"); empty for the input as a whole, which
	// the message calls "input".
	Field string
	// Problem says what is wrong, with the value and the bound.
	Problem string
}

func (e *inputError) Error() string {
	return target.ErrInvalidInput.Error() + ": " + cmp.Or(e.Field, "input") + ": " + e.Problem
}

// Unwrap makes errors.Is(err, target.ErrInvalidInput) hold.
func (e *inputError) Unwrap() error { return target.ErrInvalidInput }

// inputErrorf is the input error of field.
func inputErrorf(field, format string, args ...any) *inputError {
	return &inputError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// within prefixes the field of err (an input error) with parent, so a nested input's error
// names the whole path. Other errors and nil pass through.
func within(parent string, err error) error {
	if ie, ok := err.(*inputError); ok {
		if ie.Field == "" { // the nested input as a whole
			return &inputError{Field: parent, Problem: ie.Problem}
		}
		return &inputError{Field: parent + "." + ie.Field, Problem: ie.Problem}
	}
	return err
}

// eachWithin checks a list field: at most maxItems elements (noun names them in the
// message), each checked by check, whose errors name fields relative to the element
// ("shards[2].shard").
func eachWithin[T any](field, noun string, items []T, maxItems int, check func(T) error) error {
	if len(items) > maxItems {
		return inputErrorf(field, "%d %s, at most %d allowed", len(items), noun, maxItems)
	}
	for i, item := range items {
		if err := within(fmt.Sprintf("%s[%d]", field, i), check(item)); err != nil {
			return err
		}
	}
	return nil
}

// inRange checks lo <= v <= hi: counts, sizes and durations alike.
func inRange[T cmp.Ordered](field string, v, lo, hi T) error {
	switch {
	case v < lo:
		return inputErrorf(field, "%v is below the floor %v", v, lo)
	case v > hi:
		return inputErrorf(field, "%v is above the ceiling %v", v, hi)
	}
	return nil
}

// optional checks a count or size that is either unset (nil or 0: a default, or no cap) or
// within lo..hi.
func optional[T int | int64](field string, v *T, lo, hi T) error {
	if v == nil || *v == 0 {
		return nil
	}
	return inRange(field, *v, lo, hi)
}

// offOrInRange checks a count or duration whose negative values mean "off".
func offOrInRange[T int | time.Duration](field string, v, lo, hi T) error {
	if v < 0 {
		return nil
	}
	return inRange(field, v, lo, hi)
}

// notNegative checks v >= 0 for counters carried across continue-as-new.
func notNegative(field string, v int) error {
	if v < 0 {
		return inputErrorf(field, "%d is negative", v)
	}
	return nil
}

// oneOf checks that v is one of the allowed values.
func oneOf(field, v string, allowed ...string) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	return inputErrorf(field, "%q is not one of %s", Clip(v, quotedMax), strings.Join(quoted, ", "))
}

// textWithin checks that s is at most maxBytes of valid UTF-8 without control characters:
// free text that ends up in logs, summaries and the memo.
func textWithin(field, s string, maxBytes int) error {
	if err := lengthWithin(field, s, maxBytes); err != nil {
		return err
	}
	if !utf8.ValidString(s) {
		return inputErrorf(field, "is not valid UTF-8")
	}
	if i := strings.IndexFunc(s, unicode.IsControl); i >= 0 {
		return inputErrorf(field, "control character %q at offset %d", s[i], i)
	}
	return nil
}

// targetField checks a required target "<kind>:<name>" (target.ParseTarget).
func targetField(field, s string) error {
	if s == "" {
		return inputErrorf(field, "required, e.g. generic:gs")
	}
	if _, err := target.ParseTarget(s); err != nil {
		return inputErrorf(field, "%s", strings.TrimPrefix(err.Error(), target.ErrInvalidInput.Error()+": "))
	}
	return nil
}

// quotedMax bounds hostile text quoted in a message.
const quotedMax = 64

// CarriedOnStartError is the error of a run whose input holds field, state that only
// continue-as-new hands over, although the run was not continued as new (a forged carry).
func CarriedOnStartError(field string) error {
	return inputErrorf(field, "is handed over by continue-as-new only; a start must leave it out")
}

// TargetIDError is the error of a run whose workflow ID id has the form of a store's merge or
// compaction ID but is not own, its target's: such a run would hold that store's ID (its
// triggers attach to it) while working on target. Other forms of ID pass. Pure.
func TargetIDError(id, own, target string) error {
	if id == own || !(strings.HasPrefix(id, "merge-wal/") || strings.HasPrefix(id, "compact/")) {
		return nil
	}
	return inputErrorf("target", "%s runs under the workflow ID %q, not %q", target, own, Clip(id, 2*quotedMax))
}
