package rowcodec

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/walkeeper/walkeeper/target"
)

// DecodeJSON's value parsing: JSON scalars to a field type's Go value, and what was wrong.

func wantGot(t FieldType, got string) string { return fmt.Sprintf("want %s, got %s", t, got) }

func isNumberStart(b byte) bool { return b == '-' || b >= '0' && b <= '9' }

// parseInt64 accepts a JSON integer (no fraction, no exponent) within the int64 range.
func parseInt64(s string) (any, string) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err == nil {
		return n, ""
	}
	if errors.Is(err, strconv.ErrRange) {
		return nil, fmt.Sprintf("integer %s is out of the int64 range", target.Clip(s))
	}
	if _, ferr := strconv.ParseFloat(s, 64); ferr == nil || errors.Is(ferr, strconv.ErrRange) {
		return nil, fmt.Sprintf("want int64, got non-integer number %s", target.Clip(s))
	}
	return nil, fmt.Sprintf("want int64, got %q", target.Clip(s))
}

// parseFloat64 accepts any finite JSON number.
func parseFloat64(s string) (any, string) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		if errors.Is(err, strconv.ErrRange) {
			return nil, fmt.Sprintf("number %s is out of the float64 range", target.Clip(s))
		}
		return nil, fmt.Sprintf("want float64, got %q", target.Clip(s))
	}
	return f, ""
}

// binaryEncoding is standard base64 with padding; Strict refuses non-canonical trailing bits.
var binaryEncoding = base64.StdEncoding.Strict()

func parseBinary(s string) (any, string) {
	b, err := binaryEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Sprintf("invalid standard base64: %v", err)
	}
	return b, ""
}

func parseTimestamp(s string) (any, string) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, fmt.Sprintf("want an RFC 3339 timestamp such as \"2006-01-02T15:04:05Z\", got %q", target.Clip(s))
	}
	return normTime(t)
}

// normTime converts t to UTC at microsecond precision (the stored form) and keeps it within
// the years RFC 3339 can write.
func normTime(t time.Time) (any, string) {
	u := t.UTC()
	if y := u.Year(); y < 0 || y > 9999 {
		return nil, fmt.Sprintf("timestamp %s is outside the years 0000-9999 in UTC", u.Format(time.RFC3339Nano))
	}
	return time.UnixMicro(u.UnixMicro()).UTC(), ""
}

// rawKind names the JSON type of a raw value for error messages.
func rawKind(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number " + target.Clip(string(raw))
}

// tokenKind names the JSON type of a json.Decoder token.
func tokenKind(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			return "an object"
		}
		return fmt.Sprintf("%q", string(t))
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a bool"
	}
	return "null" // the only other token a Decoder returns
}
