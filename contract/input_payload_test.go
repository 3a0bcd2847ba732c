package contract

import (
	"encoding/json"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

func jsonPayload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A JSON input decodes to what the SDK's converter decoded, including a value of the wrong
// type kept for Validate; a hostile encoding is quoted clipped.
func TestDecodeInputPayload(t *testing.T) {
	in := MergeWalInput{Target: "generic:gs", MaxPasses: 7, Trigger: "cli", TriggerReason: "x"}
	var got, want MergeWalInput
	if err := DecodeInputPayload(jsonPayload(t, in), false, &got); err != nil {
		t.Fatal(err)
	}
	if err := converter.GetDefaultDataConverter().FromPayload(jsonPayload(t, in), &want); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Errorf("decoded %s, the SDK decodes %s", gb, wb)
	}

	var typed MergeWalInput
	if err := DecodeInputPayload(&commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")},
		Data: []byte(`{"target":"generic:gs","max_passes":"5"}`)}, false, &typed); err != nil {
		t.Fatal(err)
	}
	if err := typed.Validate(); err == nil || !strings.HasPrefix(err.Error(), "invalid input: max_passes: string") {
		t.Errorf("a value of the wrong type: Validate says %v", err)
	}

	var none MergeWalInput
	err := DecodeInputPayload(&commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte(strings.Repeat("e", 10_000))}}, false, &none)
	if err == nil || len(err.Error()) > 200 || !strings.HasPrefix(err.Error(), `invalid input: input: encoding "eee`) {
		t.Errorf("a 10,000-byte encoding: %v", err)
	}
	if err := DecodeInputPayload(nil, false, &none); err != nil {
		t.Errorf("no argument: %v", err)
	}
}
