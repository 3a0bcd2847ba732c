package contract

import (
	"bytes"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// A workflow's input arrives as payloads that anyone with namespace access writes, and not
// only as JSON: `temporal workflow start --input-meta encoding=binary/plain`, a `json/protobuf`
// or `binary/null` encoding, `json/plain` bytes that do not parse, `null`, or a second
// argument. The SDK fails such a run with its own retryable decode error naming the Go type
// (a start with a retry policy runs it again, under the same workflow ID, until the policy
// gives up), runs `null` as an absent input, and ignores extra arguments. So the workflows
// take their input as raw payloads (workflows/input_payload.go) and decode it here, into the
// run's InvalidInput for the input as a whole (decision 0561).

// DecodeInputPayload decodes a workflow's input payload p into dst (a pointer to one of the
// input types) exactly as the SDK's JSON payload converter does, after refusing what that
// converter was never meant to read: an encoding other than json/plain, `null`, bytes that are
// not JSON, and more than one argument (extra). A nil p is no argument at all, which leaves
// every field its default, as before. A value of the wrong type inside the JSON is still left
// for Validate (input_decode.go). Pure.
func DecodeInputPayload(p *commonpb.Payload, extra bool, dst any) error {
	if extra {
		return inputErrorf("", "more than one argument where one JSON object is expected")
	}
	if p == nil {
		return nil
	}
	enc, ok := p.GetMetadata()[converter.MetadataEncoding]
	if !ok {
		return inputErrorf("", "a payload without an encoding where %s is expected", converter.MetadataEncodingJSON)
	}
	if string(enc) != converter.MetadataEncodingJSON {
		return inputErrorf("", "encoding %q where %s is expected", Clip(string(enc), quotedMax), converter.MetadataEncodingJSON)
	}
	if bytes.Equal(bytes.TrimSpace(p.GetData()), []byte("null")) {
		return inputErrorf("", "null where an object is expected")
	}
	if err := converter.NewJSONPayloadConverter().FromPayload(p, dst); err != nil {
		why := strings.TrimPrefix(err.Error(), converter.ErrUnableToDecode.Error()+": ")
		return inputErrorf("", "not JSON: %s", Clip(why, 2*quotedMax))
	}
	return nil
}
