package contract

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
	require.NoError(t, DecodeInputPayload(jsonPayload(t, in), false, &got))
	require.NoError(t, converter.GetDefaultDataConverter().FromPayload(jsonPayload(t, in), &want))
	require.Equal(t, want, got, "what the SDK decodes")

	var typed MergeWalInput
	require.NoError(t, DecodeInputPayload(&commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")},
		Data: []byte(`{"target":"generic:gs","max_passes":"5"}`)}, false, &typed))
	err := typed.Validate()
	require.Error(t, err, "a value of the wrong type")
	require.True(t, strings.HasPrefix(err.Error(), "invalid input: max_passes: string"), err.Error())

	var none MergeWalInput
	err = DecodeInputPayload(&commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte(strings.Repeat("e", 10_000))}}, false, &none)
	require.Error(t, err, "a 10,000-byte encoding")
	require.LessOrEqual(t, len(err.Error()), 200)
	require.True(t, strings.HasPrefix(err.Error(), `invalid input: input: encoding "eee`), err.Error())
	require.NoError(t, DecodeInputPayload(nil, false, &none), "no argument")
}
