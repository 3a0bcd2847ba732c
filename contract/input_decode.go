package contract

import (
	"encoding/json"
	"errors"
	"reflect"
	"time"
)

// A workflow input is JSON anyone with namespace access types, and a value of the wrong type
// would fail the run with the SDK's retryable decode error, no InvalidInput. So every input
// type's UnmarshalJSON (below) decodes such a value as its zero and keeps the first as an
// input error in its decodeErr field, for Validate to report.

// decodeInput decodes data into dst (a pointer to a type without its own UnmarshalJSON) as
// encoding/json does, but leaves a value of the wrong type zero and reports it in *bad.
func decodeInput(data []byte, dst any, bad *error) error {
	err := json.Unmarshal(data, dst)
	te, ok := errors.AsType[*json.UnmarshalTypeError](err)
	if !ok {
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

func (in *MergeWalInput) UnmarshalJSON(data []byte) error {
	type plain MergeWalInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}

func (in *CompactBaseInput) UnmarshalJSON(data []byte) error {
	type plain CompactBaseInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}

func (in *MaintenanceSweepInput) UnmarshalJSON(data []byte) error {
	type plain MaintenanceSweepInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}

func (in *SweepWindowInput) UnmarshalJSON(data []byte) error {
	type plain SweepWindowInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}

func (in *MergeWalTickInput) UnmarshalJSON(data []byte) error {
	type plain MergeWalTickInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}

func (in *ReconcileDemandInput) UnmarshalJSON(data []byte) error {
	type plain ReconcileDemandInput
	return decodeInput(data, (*plain)(in), &in.decodeErr)
}
