package contract

import (
	"encoding/json"
	"errors"
	"reflect"
	"time"
)

// A workflow input is JSON that anyone with namespace access types, and the SDK decodes it
// before the workflow runs: a value of the wrong type (a string for a count, a number beyond
// int64, an array for the whole input) would fail the run with the SDK's retryable decode
// error, which is no InvalidInput and names the Go type. So every input type decodes such a
// value as its zero and keeps the first one as an input error, which Validate reports first.

// decodeInput decodes data into dst (a pointer to a type without its own UnmarshalJSON) as
// encoding/json does, except that a value of the wrong type is left zero and reported in
// *bad instead of failing the decode.
func decodeInput(data []byte, dst any, bad *error) error {
	err := json.Unmarshal(data, dst)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		*bad = nil
		return err
	}
	want := te.Type.String()
	switch {
	case te.Type == reflect.TypeFor[time.Duration]():
		want = "a duration in integer nanoseconds"
	case te.Type.Kind() == reflect.Struct:
		want = "an object"
	}
	// An empty field is the whole input (inputError.Error, within).
	*bad = inputErrorf(te.Field, "%s where %s is expected", Clip(te.Value, quotedMax), want)
	return nil
}

// UnmarshalJSON decodes a MergeWal input; a value of the wrong type is Validate's error.
func (in *MergeWalInput) UnmarshalJSON(data []byte) error {
	type plain MergeWalInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}

// UnmarshalJSON decodes a CompactBase input; a value of the wrong type is Validate's error.
func (in *CompactBaseInput) UnmarshalJSON(data []byte) error {
	type plain CompactBaseInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}

// UnmarshalJSON decodes a sweep input; a value of the wrong type is Validate's error.
func (in *MaintenanceSweepInput) UnmarshalJSON(data []byte) error {
	type plain MaintenanceSweepInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}

// UnmarshalJSON decodes a window input; a value of the wrong type is Validate's error.
func (in *SweepWindowInput) UnmarshalJSON(data []byte) error {
	type plain SweepWindowInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}

// UnmarshalJSON decodes a MergeWalTick input; a value of the wrong type is Validate's error.
func (in *MergeWalTickInput) UnmarshalJSON(data []byte) error {
	type plain MergeWalTickInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}

// UnmarshalJSON decodes a reconcile input; a value of the wrong type is Validate's error.
func (in *ReconcileDemandInput) UnmarshalJSON(data []byte) error {
	type plain ReconcileDemandInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}
