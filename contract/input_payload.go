package contract

import (
	"bytes"
	"strings"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// The SDK fails a run whose payload does not decode with a retryable error, runs `null` as no
// input and ignores extra arguments, so the workflows decode raw payloads here (decision 0561).

// DecodeInputPayload decodes a workflow's input payload p into dst exactly as the SDK's JSON
// payload converter does, after refusing an encoding other than json/plain, `null`, bytes
// that are not JSON and a second argument (extra); a nil p leaves every field its default.
// A value of the wrong type inside the JSON is left for Validate (input_decode.go). Pure.
func DecodeInputPayload(p *commonpb.Payload, extra bool, dst any) error {
	if extra {
		return inputErrorf("", "more than one argument where one JSON object is expected")
	}
	if p == nil {
		return nil
	}
	switch enc, ok := p.GetMetadata()[converter.MetadataEncoding]; {
	case !ok:
		return inputErrorf("", "a payload without an encoding where %s is expected", converter.MetadataEncodingJSON)
	case string(enc) != converter.MetadataEncodingJSON:
		return inputErrorf("", "encoding %q where %s is expected", Clip(string(enc), quotedMax), converter.MetadataEncodingJSON)
	case bytes.Equal(bytes.TrimSpace(p.GetData()), []byte("null")):
		return inputErrorf("", "null where an object is expected")
	}
	if err := converter.NewJSONPayloadConverter().FromPayload(p, dst); err != nil {
		why := strings.TrimPrefix(err.Error(), converter.ErrUnableToDecode.Error()+": ")
		return inputErrorf("", "not JSON: %s", Clip(why, 2*quotedMax))
	}
	return nil
}
