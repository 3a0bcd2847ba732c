package rowcodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/target"
)

// Kind returns the store kind.
func (c *Codec) Kind() target.Kind { return c.kind }

// Len returns the number of rows.
func (v RecordView) Len() int {
	if v.seq == nil {
		return 0
	}
	return v.seq.Len()
}

// allTypesSchema is a generic schema with every field type, nullable, plus one non-null
// non-key field.
func allTypesSchema() Schema {
	return Schema{Fields: []Field{
		{Name: "id", Type: TypeString},
		{Name: "n", Type: TypeInt64, Nullable: true},
		{Name: "f", Type: TypeFloat64, Nullable: true},
		{Name: "b", Type: TypeBool, Nullable: true},
		{Name: "s", Type: TypeString, Nullable: true},
		{Name: "bin", Type: TypeBinary, Nullable: true},
		{Name: "ts", Type: TypeTimestamp, Nullable: true},
		{Name: "req", Type: TypeInt64},
	}}
}

func testCodec(t testing.TB, k target.Kind) *Codec {
	t.Helper()
	var s Schema
	if k == target.KindGeneric {
		s = allTypesSchema()
	}
	c, err := NewCodec(k, s)
	if err != nil {
		t.Fatalf("NewCodec(%s): %v", k, err)
	}
	return c
}

// assertErr checks, without stopping the test, that err wraps class and mentions want.
func assertErr(t *testing.T, err, class error, want string, msgAndArgs ...any) {
	t.Helper()
	if assert.ErrorIs(t, err, class, msgAndArgs...) {
		assert.ErrorContains(t, err, want, msgAndArgs...)
	}
}

// buildChecked builds rows into a record that CheckRecord accepts and returns it, for the
// caller to release, with its view.
func buildChecked(t testing.TB, c *Codec, mem memory.Allocator, rows []Row, seqs []int64, shard string, deleted []bool) (arrow.RecordBatch, RecordView) {
	t.Helper()
	rec, err := c.Build(mem, rows, seqs, shard, deleted)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	if err := c.CheckRecord(rec); err != nil {
		rec.Release()
		t.Fatalf("CheckRecord: %v", err)
	}
	view, err := c.View(rec)
	if err != nil {
		rec.Release()
		t.Fatalf("View: %v", err)
	}
	return rec, view
}

// requireArrowSchema fails unless the codec's Arrow schema is the user fields of s, each
// nullable, then the three non-null system columns, with the kind in its metadata and the
// key field at KeyIndex.
func requireArrowSchema(t testing.TB, c *Codec, k target.Kind, s Schema) {
	t.Helper()
	as := c.ArrowSchema()
	require.Equal(t, len(s.Fields)+3, as.NumFields(), "%s: arrow fields", k)
	for i, f := range s.Fields {
		af := as.Field(i)
		require.True(t, af.Name == f.Name && af.Nullable && arrow.TypeEqual(af.Type, f.Type.ArrowType()), "%s: arrow field %d = %v for %+v", k, i, af, f)
	}
	for i, want := range []arrow.Field{
		{Name: "_seq", Type: arrow.PrimitiveTypes.Int64},
		{Name: "_shard", Type: arrow.BinaryTypes.String},
		{Name: "_deleted", Type: arrow.FixedWidthTypes.Boolean},
	} {
		require.True(t, as.Field(len(s.Fields)+i).Equal(want), "%s: system column %d = %v, want %v", k, i, as.Field(len(s.Fields)+i), want)
	}
	v, ok := as.Metadata().GetValue("walkeeper.kind")
	require.True(t, ok && v == string(k), "%s: metadata %v", k, as.Metadata())
	require.Equal(t, KeyField(k), as.Field(c.KeyIndex()).Name, "%s: KeyIndex %d", k, c.KeyIndex())
}

func TestNewCodec(t *testing.T) {
	for _, k := range target.Kinds {
		c := testCodec(t, k)
		if c.Kind() != k {
			t.Errorf("target.Kind() = %s", c.Kind())
		}
		s := c.Schema()
		requireArrowSchema(t, c, k, s)
		// Schema() is a copy.
		s.Fields[0].Name = "zzz"
		if c.Schema().Fields[0].Name == "zzz" {
			t.Errorf("%s: Schema() shares memory", k)
		}
	}
	key2 := Schema{Fields: []Field{{Name: "n", Type: TypeInt64, Nullable: true}, {Name: "id", Type: TypeString}}}
	c, err := NewCodec(target.KindGeneric, key2)
	if err != nil || c.KeyIndex() != 1 {
		t.Errorf("key not first: KeyIndex %v, %v", c, err)
	}
	for _, bad := range []struct {
		k target.Kind
		s Schema
	}{{target.KindGeneric, Schema{}}, {"bogus", allTypesSchema()}, {target.KindRollout, allTypesSchema()}, {target.KindGeneric, Schema{Fields: []Field{{Name: "x", Type: TypeString}}}}} {
		_, err := NewCodec(bad.k, bad.s)
		assert.ErrorIs(t, err, ErrInvalidInput, "NewCodec(%s, %v)", bad.k, bad.s)
	}
}

func TestDecodeJSONBadInput(t *testing.T) {
	const okGen = `{"id":"a","req":1}`
	dg := func(extra string) string {
		return `[{"item_id":"i","checkpoint":"c","ordinal":1` + extra + `}]`
	}
	cases := []struct {
		name string
		kind target.Kind
		body string
		max  int
		want []string // substrings of the error message
	}{
		// The body as a whole.
		{"empty body", target.KindGeneric, ``, 0, []string{"body is empty"}},
		{"whitespace body", target.KindGeneric, "  \n", 0, []string{"body is empty"}},
		{"null body", target.KindGeneric, `null`, 0, []string{"not a JSON array", "null"}},
		{"object body", target.KindGeneric, okGen, 0, []string{"not a JSON array", "object"}},
		{"string body", target.KindGeneric, `"[]"`, 0, []string{"not a JSON array", "string"}},
		{"number body", target.KindGeneric, `1`, 0, []string{"not a JSON array", "number"}},
		{"garbage body", target.KindGeneric, `nope`, 0, []string{"not valid JSON"}},
		{"unterminated array", target.KindGeneric, `[` + okGen, 0, []string{"not terminated", "after row 0"}},
		{"unterminated object", target.KindGeneric, `[{"id":"a"`, 0, []string{"row 0", "invalid JSON"}},
		{"trailing comma", target.KindGeneric, `[` + okGen + `,]`, 0, []string{"row 1", "invalid JSON"}},
		{"trailing data", target.KindGeneric, `[` + okGen + `] x`, 0, []string{"after the closing ']'"}},
		{"two arrays", target.KindGeneric, `[][]`, 0, []string{"after the closing ']'"}},
		{"bare NaN", target.KindGeneric, `[{"id":"a","req":1,"f":NaN}]`, 0, []string{"row 0", "invalid JSON"}},
		{"mismatched close", target.KindGeneric, `[}`, 0, []string{"invalid JSON at the start of the row array"}},

		// Elements that are not objects.
		{"number row", target.KindGeneric, `[1]`, 0, []string{"row 0", "want a JSON object, got number 1"}},
		{"null row", target.KindGeneric, `[` + okGen + `,null]`, 0, []string{"row 1", "want a JSON object, got null"}},
		{"array row", target.KindGeneric, `[[` + okGen + `]]`, 0, []string{"row 0", "got array"}},
		{"string row", target.KindGeneric, `["x"]`, 0, []string{"row 0", "got string"}},

		// Fields.
		{"unknown field", target.KindGeneric, `[{"id":"a","req":1,"nope":1}]`, 0, []string{"row 0", `unknown field "nope"`}},
		{"field case", target.KindGeneric, `[{"ID":"a","req":1}]`, 0, []string{`unknown field "ID"`}},
		{"system field", target.KindGeneric, `[{"id":"a","req":1,"_seq":1}]`, 0, []string{`unknown field "_seq"`}},
		{"missing key", target.KindGeneric, `[{"req":1}]`, 0, []string{"row 0", `field "id": missing`}},
		{"null key", target.KindGeneric, `[{"id":null,"req":1}]`, 0, []string{"row 0", `field "id": null is not allowed`}},
		{"empty key", target.KindGeneric, `[` + okGen + `,{"id":"","req":1}]`, 0, []string{"row 1", `field "id": the key must not be empty`}},
		{"number key", target.KindGeneric, `[{"id":1,"req":1}]`, 0, []string{`field "id": want string, got number 1`}},
		{"missing non-null", target.KindGeneric, `[{"id":"a"}]`, 0, []string{`field "req": missing`}},
		{"null non-null", target.KindGeneric, `[{"id":"a","req":null}]`, 0, []string{`field "req": null is not allowed`}},
		{"duplicate key", target.KindGeneric, `[{"id":"a","req":1,"n":1,"n":2}]`, 0, []string{"row 0", `field "n": given more than once`}},
		{"duplicate via escape", target.KindGeneric, `[{"id":"a","req":1,"\u0069d":"b"}]`, 0, []string{`field "id": given more than once`}},
		{"object for scalar", target.KindGeneric, `[{"id":"a","req":1,"s":{"x":1}}]`, 0, []string{`field "s": want string, got object`}},
		{"array for scalar", target.KindGeneric, `[{"id":"a","req":1,"n":[1]}]`, 0, []string{`field "n": want int64, got array`}},
		{"object for key", target.KindGeneric, `[{"id":{"id":"a"},"req":1}]`, 0, []string{`field "id": want string, got object`}},
		{"deep nesting", target.KindGeneric, `[{"id":"a","req":1,"s":` + strings.Repeat("[", 500) + strings.Repeat("]", 500) + `}]`, 0, []string{`field "s": want string, got array`}},

		// int64.
		{"int64 overflow", target.KindGeneric, `[{"id":"a","req":9223372036854775808}]`, 0, []string{`field "req": integer 9223372036854775808 is out of the int64 range`}},
		{"int64 underflow", target.KindGeneric, `[{"id":"a","req":-9223372036854775809}]`, 0, []string{"out of the int64 range"}},
		{"int64 huge", target.KindGeneric, `[{"id":"a","req":1` + strings.Repeat("0", 400) + `}]`, 0, []string{"out of the int64 range", "..."}},
		{"int64 fraction", target.KindGeneric, `[{"id":"a","req":1.5}]`, 0, []string{`field "req": want int64, got non-integer number 1.5`}},
		{"int64 point zero", target.KindGeneric, `[{"id":"a","req":1.0}]`, 0, []string{"non-integer number 1.0"}},
		{"int64 exponent", target.KindGeneric, `[{"id":"a","req":1e3}]`, 0, []string{"non-integer number 1e3"}},
		{"int64 string", target.KindGeneric, `[{"id":"a","req":"1"}]`, 0, []string{`field "req": want int64, got string`}},
		{"int64 bool", target.KindGeneric, `[{"id":"a","req":true}]`, 0, []string{`want int64, got bool`}},

		// float64.
		{"float overflow", target.KindGeneric, `[{"id":"a","req":1,"f":1e400}]`, 0, []string{`field "f": number 1e400 is out of the float64 range`}},
		{"float negative overflow", target.KindGeneric, `[{"id":"a","req":1,"f":-1e400}]`, 0, []string{"out of the float64 range"}},
		{"float NaN string", target.KindGeneric, `[{"id":"a","req":1,"f":"NaN"}]`, 0, []string{`field "f": want float64, got string`}},
		{"float Infinity string", target.KindGeneric, `[{"id":"a","req":1,"f":"Infinity"}]`, 0, []string{`want float64, got string`}},
		{"float -Inf string", target.KindGeneric, `[{"id":"a","req":1,"f":"-Inf"}]`, 0, []string{`want float64, got string`}},

		// bool, binary, timestamp.
		{"bool string", target.KindGeneric, `[{"id":"a","req":1,"b":"true"}]`, 0, []string{`field "b": want bool, got string`}},
		{"bool number", target.KindGeneric, `[{"id":"a","req":1,"b":1}]`, 0, []string{`want bool, got number 1`}},
		{"binary bad base64", target.KindGeneric, `[{"id":"a","req":1,"bin":"!!!"}]`, 0, []string{`field "bin": invalid standard base64`}},
		{"binary url alphabet", target.KindGeneric, `[{"id":"a","req":1,"bin":"_-8="}]`, 0, []string{"invalid standard base64"}},
		{"binary unpadded", target.KindGeneric, `[{"id":"a","req":1,"bin":"YQ"}]`, 0, []string{"invalid standard base64"}},
		{"binary number", target.KindGeneric, `[{"id":"a","req":1,"bin":12}]`, 0, []string{`field "bin": want binary, got number`}},
		{"timestamp bad", target.KindGeneric, `[{"id":"a","req":1,"ts":"yesterday"}]`, 0, []string{`field "ts": want an RFC 3339 timestamp`, "yesterday"}},
		{"timestamp no zone", target.KindGeneric, `[{"id":"a","req":1,"ts":"2024-01-01T00:00:00"}]`, 0, []string{"RFC 3339"}},
		{"timestamp date only", target.KindGeneric, `[{"id":"a","req":1,"ts":"2024-01-01"}]`, 0, []string{"RFC 3339"}},
		{"timestamp epoch number", target.KindGeneric, `[{"id":"a","req":1,"ts":1700000000}]`, 0, []string{`want timestamp, got number`}},
		{"timestamp before year 0", target.KindGeneric, `[{"id":"a","req":1,"ts":"0000-01-01T00:00:00+01:00"}]`, 0, []string{"outside the years 0000-9999"}},
		{"timestamp after 9999", target.KindGeneric, `[{"id":"a","req":1,"ts":"9999-12-31T23:00:00-02:00"}]`, 0, []string{"outside the years 0000-9999"}},

		// Text encoding.
		{"invalid UTF-8 value", target.KindGeneric, "[{\"id\":\"a\",\"req\":1,\"s\":\"a\xffb\"}]", 0, []string{"row 0", `field "s": invalid UTF-8`}},
		{"invalid UTF-8 key value", target.KindGeneric, "[{\"id\":\"\xc3\x28\",\"req\":1}]", 0, []string{`field "id": invalid UTF-8`}},
		{"invalid UTF-8 field name", target.KindGeneric, "[{\"id\":\"a\",\"req\":1,\"s\xff\":\"x\"}]", 0, []string{"row 0", "invalid UTF-8"}},
		{"overlong UTF-8", target.KindGeneric, "[{\"id\":\"a\",\"req\":1,\"s\":\"\xc0\xaf\"}]", 0, []string{"invalid UTF-8"}},
		{"UTF-8 surrogate bytes", target.KindGeneric, "[{\"id\":\"a\",\"req\":1,\"s\":\"\xed\xa0\x80\"}]", 0, []string{"invalid UTF-8"}},
		{"lone high surrogate", target.KindGeneric, `[{"id":"a","req":1,"s":"x\ud800y"}]`, 0, []string{`field "s": a lone UTF-16 surrogate escape \ud800`}},
		{"lone low surrogate", target.KindGeneric, `[{"id":"a","req":1,"s":"\udc00"}]`, 0, []string{`lone UTF-16 surrogate escape \udc00`}},
		{"reversed surrogates", target.KindGeneric, `[{"id":"a","req":1,"s":"\udc00\ud800"}]`, 0, []string{"lone UTF-16 surrogate"}},
		{"high surrogate at end", target.KindGeneric, `[{"id":"a","req":1,"s":"\ud83d"}]`, 0, []string{"lone UTF-16 surrogate"}},
		{"surrogate in field name", target.KindGeneric, `[{"id":"a","req":1,"\ud800":1}]`, 0, []string{"row 0", "field name", "lone UTF-16 surrogate"}},

		// Size.
		{"row too large", target.KindGeneric, `[` + okGen + `,{"id":"b","req":1,"s":"` + strings.Repeat("x", 100) + `"}]`, 64, []string{"row 1", "larger than the limit of 64 bytes"}},
		// A large element that is no object is refused by its size before its type is read.
		{"large string row", target.KindGeneric, `["` + strings.Repeat("x", 100) + `"]`, 50, []string{"row 0", "larger than the limit of 50 bytes"}},

		// Rows after a good one are numbered; a row's own error is reported before a syntax
		// error later in the body, since rows are checked as they are read.
		{"third row", target.KindGeneric, `[` + okGen + `,` + okGen + `,{"id":"c","req":"x"}]`, 0, []string{"row 2", `field "req"`}},
		{"error before broken tail", target.KindGeneric, `[` + okGen + `,{"id":"b","req":"x"},{"id":`, 0, []string{`row 1: field "req": want int64, got string`}},
		{"broken tail", target.KindGeneric, `[` + okGen + `,` + okGen + `,{"id":`, 0, []string{"row 2: invalid JSON"}},

		// Rollout.
		{"rollout unknown", target.KindRollout, `[{"id":"r","reward":1,"extra":2}]`, 0, []string{`unknown field "extra"`, "rollout"}},
		{"rollout step float", target.KindRollout, `[{"id":"r","step":2.5}]`, 0, []string{`field "step": want int64`}},
		{"rollout metadata object", target.KindRollout, `[{"id":"r","metadata":{"a":1}}]`, 0, []string{`field "metadata": want string, got object`}},
		{"rollout missing id", target.KindRollout, `[{"reward":1}]`, 0, []string{`field "id": missing`}},

		// Datagen.
		{"datagen missing item", target.KindDatagen, `[{"checkpoint":"c","ordinal":1}]`, 0, []string{`field "item_id": missing`}},
		{"datagen null checkpoint", target.KindDatagen, `[{"item_id":"i","checkpoint":null,"ordinal":1}]`, 0, []string{`field "checkpoint": null is not allowed`}},
		{"datagen ordinal string", target.KindDatagen, `[{"item_id":"i","checkpoint":"c","ordinal":"1"}]`, 0, []string{`field "ordinal": want int64, got string`}},
		{"datagen event_id mismatch", target.KindDatagen, dg(`,"event_id":"00000000-0000-0000-0000-000000000000"`), 0, []string{`field "event_id"`, "does not match the id derived", DatagenEventID("i", "c", 1)}},
		{"datagen event_id upper", target.KindDatagen, dg(`,"event_id":"` + strings.ToUpper(DatagenEventID("i", "c", 1)) + `"`), 0, []string{"does not match"}},
		{"datagen event_id empty", target.KindDatagen, dg(`,"event_id":""`), 0, []string{"does not match"}},
		{"datagen event_id number", target.KindDatagen, dg(`,"event_id":5`), 0, []string{`field "event_id": want string`}},
		{"datagen NUL item", target.KindDatagen, `[{"item_id":"a\u0000b","checkpoint":"c","ordinal":1}]`, 0, []string{`field "item_id": NUL bytes are not allowed`}},
		{"datagen NUL checkpoint", target.KindDatagen, `[{"item_id":"a","checkpoint":"\u0000","ordinal":1}]`, 0, []string{`field "checkpoint": NUL bytes`}},
	}
	codecs := map[target.Kind]*Codec{}
	for _, k := range target.Kinds {
		codecs[k] = testCodec(t, k)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows, err := codecs[c.kind].DecodeJSON([]byte(c.body), c.max)
			require.ErrorIs(t, err, ErrInvalidInput, "rows %+v", rows)
			assert.Nil(t, rows, "rows returned with an error")
			for _, w := range c.want {
				assert.ErrorContains(t, err, w)
			}
			assert.LessOrEqual(t, len(err.Error()), 600, "error message length")
		})
	}
}

func TestDecodeJSONEmptyArray(t *testing.T) {
	c := testCodec(t, target.KindGeneric)
	for _, body := range []string{`[]`, ` [ ] `, "\n[\n]\n"} {
		rows, err := c.DecodeJSON([]byte(body), 10)
		if err != nil || rows == nil || len(rows) != 0 {
			t.Errorf("DecodeJSON(%q) = %#v, %v; want empty non-nil slice", body, rows, err)
		}
	}
}

// TestUnknownFieldListsAtMostTwelve: the unknown-field message names the first 12 fields of
// a wider schema and then how many there are.
func TestUnknownFieldListsAtMostTwelve(t *testing.T) {
	s := Schema{Fields: []Field{{Name: "id", Type: TypeString}}}
	for i := 1; i < 13; i++ {
		s.Fields = append(s.Fields, Field{Name: fmt.Sprintf("f%d", i), Type: TypeInt64, Nullable: true})
	}
	for n, tail := range map[int]string{13: ", ... (13 fields))", 12: ")"} {
		c, err := NewCodec(target.KindGeneric, Schema{Fields: s.Fields[:n]})
		require.NoError(t, err)
		_, err = c.DecodeJSON([]byte(`[{"id":"a","nope":1}]`), 0)
		want := "(the generic schema has id, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11" + tail
		require.Error(t, err)
		require.True(t, strings.HasSuffix(err.Error(), want), "%v, want it to end with %s", err, want)
	}
}

func TestDecodeJSONRowSize(t *testing.T) {
	c := testCodec(t, target.KindGeneric)
	row := `{"id":"a", "req":1}` // 19 bytes, inner whitespace counts
	body := "[  " + row + "  ,\n" + row + "\n]"
	_, err := c.DecodeJSON([]byte(body), len(row))
	assert.NoError(t, err, "a row of exactly the limit")
	_, err = c.DecodeJSON([]byte(body), 0)
	assert.NoError(t, err, "no limit")
	_, err = c.DecodeJSON([]byte(body), len(row)-1)
	assertErr(t, err, ErrInvalidInput, "row 0: 19 bytes of JSON, larger than the limit of 18 bytes")
}

// roundTripCase is a JSON body, the rows it must decode to (as RowJSON renders them).
type roundTripCase struct {
	kind target.Kind
	body string
	want []map[string]any
}

func roundTripCases() map[string]roundTripCase {
	eid := DatagenEventID("item-1", "ckpt-7", 3)
	return map[string]roundTripCase{
		"generic": {target.KindGeneric, `[
			{"id":"full","n":-9223372036854775808,"f":1.5e-300,"b":true,"s":"héllo \"q\" \n \u00e9 \ud83d\ude00","bin":"AAEC/w==","ts":"2024-02-29T23:59:59.123456789+02:00","req":9223372036854775807},
			{"id":"nulls","n":null,"f":null,"b":null,"s":null,"bin":null,"ts":null,"req":0},
			{"id":"missing","req":-1},
			{"id":"zeros","n":0,"f":-0,"b":false,"s":"","bin":"","ts":"0000-01-01T00:00:00Z","req":0},
			{"req":1,"id":"reordered","f":12,"ts":"9999-12-31T23:59:59.999999Z"}
		]`, []map[string]any{
			{"id": "full", "n": int64(math.MinInt64), "f": 1.5e-300, "b": true, "s": "héllo \"q\" \n é 😀", "bin": "AAEC/w==", "ts": "2024-02-29T21:59:59.123456Z", "req": int64(math.MaxInt64)},
			{"id": "nulls", "n": nil, "f": nil, "b": nil, "s": nil, "bin": nil, "ts": nil, "req": int64(0)},
			{"id": "missing", "n": nil, "f": nil, "b": nil, "s": nil, "bin": nil, "ts": nil, "req": int64(-1)},
			{"id": "zeros", "n": int64(0), "f": 0.0, "b": false, "s": "", "bin": "", "ts": "0000-01-01T00:00:00Z", "req": int64(0)},
			{"id": "reordered", "n": nil, "f": 12.0, "b": nil, "s": nil, "bin": nil, "ts": "9999-12-31T23:59:59.999999Z", "req": int64(1)},
		}},
		"rollout": {target.KindRollout, `[
			{"id":"r1","run_id":"run","step":7,"prompt":"p","completion":"c","reward":0.25,"done":true,"binary_payload":"aGk=","metadata":"{\"k\":[1,2]}","created_at":"2025-06-01T12:00:00Z"},
			{"id":"r2"}
		]`, []map[string]any{
			{"id": "r1", "run_id": "run", "step": int64(7), "prompt": "p", "completion": "c", "reward": 0.25, "done": true, "binary_payload": "aGk=", "metadata": `{"k":[1,2]}`, "created_at": "2025-06-01T12:00:00Z"},
			{"id": "r2", "run_id": nil, "step": nil, "prompt": nil, "completion": nil, "reward": nil, "done": nil, "binary_payload": nil, "metadata": nil, "created_at": nil},
		}},
		"datagen": {target.KindDatagen, `[
			{"item_id":"item-1","checkpoint":"ckpt-7","ordinal":3,"payload":"x","label":"y","score":-2.5,"created_at":"2025-01-01T00:00:00.5Z"},
			{"event_id":"` + eid + `","item_id":"item-1","checkpoint":"ckpt-7","ordinal":3},
			{"event_id":null,"item_id":"","checkpoint":"","ordinal":-4}
		]`, []map[string]any{
			{"event_id": eid, "item_id": "item-1", "checkpoint": "ckpt-7", "ordinal": int64(3), "payload": "x", "label": "y", "score": -2.5, "created_at": "2025-01-01T00:00:00.5Z"},
			{"event_id": eid, "item_id": "item-1", "checkpoint": "ckpt-7", "ordinal": int64(3), "payload": nil, "label": nil, "score": nil, "created_at": nil},
			{"event_id": DatagenEventID("", "", -4), "item_id": "", "checkpoint": "", "ordinal": int64(-4), "payload": nil, "label": nil, "score": nil, "created_at": nil},
		}},
	}
}

func TestRoundTrip(t *testing.T) {
	for name, tc := range roundTripCases() {
		t.Run(name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			c := testCodec(t, tc.kind)
			rows, err := c.DecodeJSON([]byte(tc.body), 4096)
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != len(tc.want) {
				t.Fatalf("%d rows, want %d", len(rows), len(tc.want))
			}
			seqs := make([]int64, len(rows))
			for i := range rows {
				seqs[i] = int64(100 + i)
				if rows[i].Key != tc.want[i][KeyField(tc.kind)] {
					t.Errorf("row %d: Key %q", i, rows[i].Key)
				}
			}
			rec, view := buildChecked(t, c, mem, rows, seqs, "shard-a", nil)
			defer rec.Release()
			if rec.NumRows() != int64(len(rows)) {
				t.Fatalf("NumRows %d", rec.NumRows())
			}
			for i := range rows {
				if got := c.RowJSON(rec, i); !reflect.DeepEqual(got, tc.want[i]) {
					t.Errorf("row %d:\n got %#v\nwant %#v", i, got, tc.want[i])
				}
				if view.Seq(i) != seqs[i] || view.Shard(i) != "shard-a" || view.Deleted(i) {
					t.Errorf("row %d view: %d %q %t", i, view.Seq(i), view.Shard(i), view.Deleted(i))
				}
			}
			requireRowJSONDecodesBack(t, c, rec, view, rows)
		})
	}
}

// requireRowJSONDecodesBack fails unless the view of rec holds the rows' keys and the RowJSON
// of each row, as a JSON array, is valid input that decodes to the same rows.
func requireRowJSONDecodesBack(t testing.TB, c *Codec, rec arrow.RecordBatch, view RecordView, rows []Row) {
	t.Helper()
	out := make([]map[string]any, len(rows))
	for i := range rows {
		require.Equal(t, rows[i].Key, view.Key(i), "view key of row %d", i)
		out[i] = c.RowJSON(rec, i)
	}
	b, err := json.Marshal(out)
	require.NoError(t, err, "RowJSON output does not marshal")
	again, err := c.DecodeJSON(b, 0)
	require.NoError(t, err, "RowJSON output does not decode:\n%s", b)
	require.True(t, rowsEqual(rows, again), "round trip changed rows:\n%#v\n%#v", rows, again)
}

func TestDatagenEventID(t *testing.T) {
	a := DatagenEventID("item", "ckpt", 1)
	require.Equal(t, a, DatagenEventID("item", "ckpt", 1), "deterministic")
	// Pinned (cross-checked with Python uuid.uuid5): stored keys depend on it.
	require.Equal(t, "3789269a-c7da-5cc3-b20f-2b4624eae8aa", a)
	for _, other := range []string{DatagenEventID("item", "ckpt", 2), DatagenEventID("item", "ckpt2", 1), DatagenEventID("item2", "ckpt", 1),
		DatagenEventID("itemc", "kpt", 1), DatagenEventID("item", "ckpt", -1)} {
		assert.NotEqual(t, a, other, "collision")
	}
	c := testCodec(t, target.KindDatagen)
	// A retried append of the same item/checkpoint/ordinal derives the same key, whatever
	// else changed; a different ordinal derives a different one.
	rows, err := c.DecodeJSON([]byte(`[
		{"item_id":"item","checkpoint":"ckpt","ordinal":1,"payload":"first"},
		{"item_id":"item","checkpoint":"ckpt","ordinal":1,"payload":"retry","score":1},
		{"item_id":"item","checkpoint":"ckpt","ordinal":2},
		{"event_id":"`+a+`","item_id":"item","checkpoint":"ckpt","ordinal":1}
	]`), 0)
	require.NoError(t, err)
	assert.Equal(t, []string{a, a, DatagenEventID("item", "ckpt", 2), a}, []string{rows[0].Key, rows[1].Key, rows[2].Key, rows[3].Key})
	assert.Equal(t, a, rows[0].Values[c.KeyIndex()], "event_id value")
	_, err = c.DecodeObjects([]map[string]any{{"event_id": DatagenEventID("item", "ckpt", 2), "item_id": "item", "checkpoint": "ckpt", "ordinal": 1}}, 0)
	assertErr(t, err, ErrInvalidInput, "does not match", "mismatch via DecodeObjects")
}

func TestDecodeObjects(t *testing.T) {
	c := testCodec(t, target.KindGeneric)
	ts := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	rows, err := c.DecodeObjects([]map[string]any{
		{"id": "a", "n": json.Number("-5"), "f": json.Number("2.5"), "b": true, "s": "x", "bin": "AQI=", "ts": "2024-01-01T00:00:00Z", "req": json.Number("7")},
		{"id": "b", "n": 5, "f": float32(0.5), "bin": []byte{1, 2}, "ts": ts, "req": uint8(3)},
		{"id": "c", "f": 3, "req": int64(-1), "s": nil},
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]any{
		{"a", int64(-5), 2.5, true, "x", []byte{1, 2}, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), int64(7)},
		{"b", int64(5), 0.5, nil, nil, []byte{1, 2}, time.Date(2024, 5, 6, 6, 8, 9, 123456000, time.UTC), int64(3)},
		{"c", nil, 3.0, nil, nil, nil, nil, int64(-1)},
	}
	if !rowsEqual(rows, []Row{{Key: "a", Values: want[0]}, {Key: "b", Values: want[1]}, {Key: "c", Values: want[2]}}) {
		t.Errorf("rows %v", rows)
	}
	if orows, err := c.DecodeObjects(nil, 0); err != nil || orows == nil || len(orows) != 0 {
		t.Errorf("no objects: %#v %v", orows, err)
	}

	bad := []struct {
		name string
		obj  map[string]any
		max  int
		want string
	}{
		{"nil object", nil, 0, "row 0: want a JSON object, got null"},
		{"unknown sorted", map[string]any{"id": "a", "req": 1, "zz": 1, "aa": 1}, 0, `unknown field "aa"`},
		{"float for int64", map[string]any{"id": "a", "req": 1.0}, 0, `field "req": want int64, got a float`},
		{"int64 overflow", map[string]any{"id": "a", "req": json.Number("9223372036854775808")}, 0, "out of the int64 range"},
		{"uint64 overflow", map[string]any{"id": "a", "req": uint64(math.MaxUint64)}, 0, "out of the int64 range"},
		{"NaN", map[string]any{"id": "a", "req": 1, "f": math.NaN()}, 0, `field "f": NaN is not a finite number`},
		{"Inf", map[string]any{"id": "a", "req": 1, "f": math.Inf(1)}, 0, "not a finite number"},
		{"NaN string", map[string]any{"id": "a", "req": 1, "f": "NaN"}, 0, "want float64, got string"},
		{"nested map", map[string]any{"id": "a", "req": 1, "s": map[string]any{}}, 0, `field "s": want string, got object`},
		{"nested slice", map[string]any{"id": "a", "req": 1, "n": []any{1}}, 0, "want int64, got array"},
		{"invalid UTF-8", map[string]any{"id": "a\xff", "req": 1}, 0, `field "id": invalid UTF-8`},
		{"missing key", map[string]any{"req": 1}, 0, `field "id": missing`},
		{"null key", map[string]any{"id": nil, "req": 1}, 0, `field "id": null is not allowed`},
		{"empty key", map[string]any{"id": "", "req": 1}, 0, "the key must not be empty"},
		{"unsupported type", map[string]any{"id": "a", "req": 1, "s": struct{}{}}, 0, "unsupported Go type"},
		{"too large", map[string]any{"id": "a", "req": 1, "s": strings.Repeat("x", 50)}, 40, "larger than the limit of 40 bytes"},
		{"unmarshalable", map[string]any{"id": "a", "req": 1, "f": math.NaN()}, 1000, "cannot be encoded as JSON"},
		{"time out of range", map[string]any{"id": "a", "req": 1, "ts": time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, 0, "outside the years"},
	}
	for _, b := range bad {
		_, err := c.DecodeObjects([]map[string]any{b.obj}, b.max)
		assertErr(t, err, ErrInvalidInput, b.want, b.name)
	}
}

func TestBuildTombstones(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := testCodec(t, target.KindDatagen)
	rows, err := c.DecodeJSON([]byte(`[{"item_id":"i","checkpoint":"c","ordinal":1,"payload":"p"}]`), 0)
	if err != nil {
		t.Fatal(err)
	}
	// A tombstone row carries only its key, even for non-null fields; stale Values are ignored.
	rows = append(rows, Row{Key: "gone"}, Row{Key: "gone2", Values: []any{1, 2, 3}})
	rec, v := buildChecked(t, c, mem, rows, []int64{5, 6, 7}, "s1", []bool{false, true, true})
	defer rec.Release()
	if v.Len() != 3 || v.Deleted(0) || !v.Deleted(1) || !v.Deleted(2) || v.Key(1) != "gone" || v.Seq(2) != 7 || v.Shard(1) != "s1" {
		t.Errorf("view: len %d, deleted %t %t %t", v.Len(), v.Deleted(0), v.Deleted(1), v.Deleted(2))
	}
	assert.Equal(t, map[string]any{"event_id": "gone", "item_id": nil, "checkpoint": nil, "ordinal": nil, "payload": nil,
		"label": nil, "score": nil, "created_at": nil}, c.RowJSON(rec, 1), "a tombstone row holds only its key")
}

func TestBuildErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := testCodec(t, target.KindGeneric)
	good := func() []any { return []any{"k", nil, nil, nil, nil, nil, nil, int64(1)} }
	with := func(j int, v any) Row {
		vals := good()
		vals[j] = v
		return Row{Key: "k", Values: vals}
	}
	cases := []struct {
		name    string
		rows    []Row
		seqs    []int64
		deleted []bool
		want    string
	}{
		{"seq count", []Row{with(0, "k")}, nil, nil, "1 rows but 0 sequences"},
		{"deleted count", []Row{with(0, "k")}, []int64{1}, []bool{true, false}, "1 rows but 2 deleted flags"},
		{"empty key", []Row{{Key: "", Values: good()}}, []int64{1}, nil, `row 0: field "id": the key must not be empty`},
		{"empty tombstone key", []Row{{Key: ""}}, []int64{1}, []bool{true}, "the key must not be empty"},
		{"value count", []Row{{Key: "k", Values: []any{"k"}}}, []int64{1}, nil, "want 8 values (one per field), got 1"},
		{"nil values", []Row{{Key: "k"}}, []int64{1}, []bool{false}, "want 8 values"},
		{"wrong Go type", []Row{with(0, "k"), with(1, 5)}, []int64{1, 2}, nil, `row 1: field "n": want Go value of type int64, got int`},
		{"string for binary", []Row{with(5, "AA==")}, []int64{1}, nil, `field "bin": want Go value of type binary, got string`},
		{"null non-null", []Row{with(7, nil)}, []int64{1}, nil, `field "req": null is not allowed`},
		{"NaN", []Row{with(2, math.NaN())}, []int64{1}, nil, `field "f": NaN is not a finite number`},
		{"key mismatch", []Row{with(0, "other")}, []int64{1}, nil, `field "id" is "other" but the row key is "k"`},
		{"time out of range", []Row{with(6, time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC))}, []int64{1}, nil, "outside the years"},
	}
	for _, tc := range cases {
		rec, err := c.Build(mem, tc.rows, tc.seqs, "s", tc.deleted)
		if err == nil {
			rec.Release()
			t.Errorf("%s: Build succeeded", tc.name)
			continue
		}
		assertErr(t, err, ErrInvalidInput, tc.want, tc.name)
	}
	// Zero rows make an empty record; a nil allocator means the default one.
	rec, err := c.Build(nil, nil, nil, "s", nil)
	require.NoError(t, err)
	defer rec.Release()
	require.Zero(t, rec.NumRows())
	require.NoError(t, c.CheckRecord(rec))
	assert.Nil(t, c.RowJSON(rec, 0), "a row out of range")
	assert.Nil(t, c.RowJSON(nil, 0), "a nil record")
}

// recordOf makes a record of the given fields from column arrays it holds its own
// references to, for the caller to release.
func recordOf(fields []arrow.Field, cols []arrow.Array, md *arrow.Metadata) arrow.RecordBatch {
	return array.NewRecordBatch(arrow.NewSchema(fields, md), cols, int64(cols[0].Len()))
}

func TestCheckRecordAndView(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	c := testCodec(t, target.KindRollout)
	rows, err := c.DecodeJSON([]byte(`[{"id":"a"},{"id":"b"}]`), 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := buildChecked(t, c, mem, rows, []int64{1, 2}, "s", []bool{false, true})
	defer rec.Release()
	assert.ErrorIs(t, c.CheckRecord(nil), ErrCorrupt, "CheckRecord(nil)")
	_, err = c.View(nil)
	assert.ErrorIs(t, err, ErrCorrupt, "View(nil)")

	// Another kind's codec refuses the record.
	for _, k := range []target.Kind{target.KindGeneric, target.KindDatagen} {
		assert.ErrorIs(t, testCodec(t, k).CheckRecord(rec), ErrCorrupt, "%s codec on a rollout record", k)
	}
	// Same fields, other kind in the metadata.
	sameFieldsOtherKind := arrow.NewMetadata([]string{MetadataKind}, []string{"generic"})
	cols := rec.Columns()
	other := recordOf(c.ArrowSchema().Fields(), cols, &sameFieldsOtherKind)
	defer other.Release()
	assertErr(t, c.CheckRecord(other), ErrCorrupt, `kind "generic"`, "other kind metadata")
	// No metadata at all is fine (only fields are compared).
	plain := recordOf(c.ArrowSchema().Fields(), cols, nil)
	defer plain.Release()
	assert.NoError(t, c.CheckRecord(plain), "record without metadata")

	// A projection to the key and system columns is viewable but not a full record.
	n := len(c.Schema().Fields)
	proj := []int{c.KeyIndex(), n, n + 1, n + 2}
	var pf []arrow.Field
	var pc []arrow.Array
	for _, j := range proj {
		pf = append(pf, c.ArrowSchema().Field(j))
		pc = append(pc, cols[j])
	}
	projected := recordOf(pf, pc, nil)
	defer projected.Release()
	assertErr(t, c.CheckRecord(projected), ErrCorrupt, "column 1", "projected CheckRecord")
	v, err := c.View(projected)
	if err != nil || v.Len() != 2 || v.Key(1) != "b" || !v.Deleted(1) || v.Seq(0) != 1 {
		t.Errorf("projected view: %v", err)
	}

	// Missing, mistyped and null system columns are corrupt.
	nullSeq, _, err := array.FromJSON(mem, arrow.PrimitiveTypes.Int64, strings.NewReader(`[1, null]`))
	require.NoError(t, err)
	defer nullSeq.Release()
	floatSeq, _, err := array.FromJSON(mem, arrow.PrimitiveTypes.Float64, strings.NewReader(`[1, 2]`))
	require.NoError(t, err)
	defer floatSeq.Release()
	bad := []struct {
		name  string
		field arrow.Field
		col   arrow.Array
		want  string
	}{
		{"null seq", arrow.Field{Name: ColSeq, Type: arrow.PrimitiveTypes.Int64, Nullable: true}, nullSeq, `"_seq" has 1 nulls`},
		{"float seq", arrow.Field{Name: ColSeq, Type: arrow.PrimitiveTypes.Float64}, floatSeq, `"_seq" has type float64`},
		{"renamed seq", arrow.Field{Name: "seq", Type: arrow.PrimitiveTypes.Int64}, cols[n], `0 columns named "_seq"`},
	}
	for _, b := range bad {
		fs := append([]arrow.Field(nil), pf...)
		fs[1] = b.field
		cs := append([]arrow.Array(nil), pc...)
		cs[1] = b.col
		r := recordOf(fs, cs, nil)
		_, err := c.View(r)
		assertErr(t, err, ErrCorrupt, b.want, b.name)
		r.Release()
	}
	// A null in a non-null system column of a full record.
	full := append([]arrow.Array(nil), cols...)
	full[n] = nullSeq
	nulls := recordOf(c.ArrowSchema().Fields(), full, nil)
	defer nulls.Release()
	assertErr(t, c.CheckRecord(nulls), ErrCorrupt, "nulls", "null _seq")
}

func rowsEqual(a, b []Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || len(a[i].Values) != len(b[i].Values) {
			return false
		}
		for j := range a[i].Values {
			if !valueEqual(a[i].Values[j], b[i].Values[j]) {
				return false
			}
		}
	}
	return true
}

func valueEqual(x, y any) bool {
	switch xv := x.(type) {
	case []byte:
		yv, ok := y.([]byte)
		return ok && bytes.Equal(xv, yv)
	case time.Time:
		yv, ok := y.(time.Time)
		return ok && xv.Equal(yv) && xv.Location() == time.UTC && yv.Location() == time.UTC
	case float64:
		yv, ok := y.(float64)
		return ok && (xv == yv || math.IsNaN(xv) && math.IsNaN(yv))
	}
	return x == y
}

// FuzzDecodeJSON: DecodeJSON never panics; it fails only with ErrInvalidInput; rows it
// accepts are valid Rows that Build into a record which passes CheckRecord, whose RowJSON
// output marshals and decodes back to the same rows.
func FuzzDecodeJSON(f *testing.F) {
	for _, tc := range roundTripCases() {
		sel := uint8(0)
		for i, k := range target.Kinds {
			if k == tc.kind {
				sel = uint8(i)
			}
		}
		f.Add(sel, []byte(tc.body), uint16(0))
	}
	f.Add(uint8(1), []byte(`[{"id":"a","req":1,"n":1,"n":2}]`), uint16(0))
	f.Add(uint8(1), []byte("[{\"id\":\"a\xff\",\"req\":1}]"), uint16(0))
	f.Add(uint8(1), []byte(`[{"id":"a","req":1,"s":"\ud800"}]`), uint16(0))
	f.Add(uint8(1), []byte(`[{"id":"a","req":99999999999999999999}]`), uint16(0))
	f.Add(uint8(1), []byte(`[{"id":"a","req":1}]`), uint16(10))
	f.Add(uint8(0), []byte(`[{"id":"r","metadata":{"a":[1]}}]`), uint16(0))
	f.Add(uint8(2), []byte(`[{"item_id":"i","checkpoint":"c","ordinal":1,"event_id":"x"}]`), uint16(0))
	f.Add(uint8(1), []byte(`[]`), uint16(0))
	f.Add(uint8(1), []byte(`{}`), uint16(0))
	var codecs []*Codec
	for _, k := range target.Kinds {
		codecs = append(codecs, testCodec(f, k))
	}
	f.Fuzz(func(t *testing.T, sel uint8, body []byte, maxRow uint16) {
		c := codecs[int(sel)%len(codecs)]
		rows, err := c.DecodeJSON(body, int(maxRow))
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("error %v does not wrap ErrInvalidInput", err)
			}
			return
		}
		if rows == nil {
			t.Fatal("nil rows without error")
		}
		for i, r := range rows {
			if r.Key == "" || len(r.Values) != len(c.names) || r.Values[c.KeyIndex()] != r.Key {
				t.Fatalf("row %d invalid: %#v", i, r)
			}
			for j, v := range r.Values {
				if v == nil {
					if !c.schema.Fields[j].Nullable {
						t.Fatalf("row %d: null in non-null field %s", i, c.names[j])
					}
				} else if p := checkGoValue(c.schema.Fields[j].Type, v); p != "" {
					t.Fatalf("row %d field %s: %s", i, c.names[j], p)
				}
				if s, ok := v.(string); ok && !utf8.ValidString(s) {
					t.Fatalf("row %d field %s: invalid UTF-8 accepted", i, c.names[j])
				}
			}
		}
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer mem.AssertSize(t, 0)
		seqs := make([]int64, len(rows))
		rec, view := buildChecked(t, c, mem, rows, seqs, "fuzz", nil)
		defer rec.Release()
		requireRowJSONDecodesBack(t, c, rec, view, rows)
		// Differential check of the hand-written splitter against encoding/json: the same
		// body decoded by json.Decoder (UseNumber) and fed to DecodeObjects gives the same rows.
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		var objs []map[string]any
		if err := dec.Decode(&objs); err != nil {
			t.Fatalf("encoding/json refuses a body DecodeJSON accepted: %v", err)
		}
		orows, err := c.DecodeObjects(objs, 0)
		if err != nil {
			t.Fatalf("DecodeObjects refuses what DecodeJSON accepted: %v", err)
		}
		if !rowsEqual(rows, orows) {
			t.Fatalf("DecodeJSON and encoding/json+DecodeObjects disagree:\n%#v\n%#v", rows, orows)
		}
	})
}

// TestDecodeJSONSplitting covers the hand-written splitter: strings holding brackets, quotes,
// escaped backslashes and commas, every kind of JSON whitespace, escaped field names.
func TestDecodeJSONSplitting(t *testing.T) {
	c := testCodec(t, target.KindGeneric)
	body := " \t\r\n[ \t\r\n{ \"id\" \t:\r\n\"a]}\\\"\\\\\" , \"s\":\"[{,\\\\\",\"\\u0072eq\":1 } , {\"req\":-0,\"id\":\"}\"}\n]\n "
	rows, err := c.DecodeJSON([]byte(body), 0)
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	want := []Row{
		{Key: `a]}"\`, Values: []any{`a]}"\`, nil, nil, nil, `[{,\`, nil, nil, int64(1)}},
		{Key: "}", Values: []any{"}", nil, nil, nil, nil, nil, nil, int64(0)}},
	}
	if !rowsEqual(rows, want) {
		t.Errorf("got %#v", rows)
	}
}

func BenchmarkDecodeJSON(b *testing.B) {
	c := testCodec(b, target.KindRollout)
	var buf bytes.Buffer
	buf.WriteString("[")
	for i := 0; i < 1000; i++ {
		if i > 0 {
			buf.WriteString(",")
		}
		fmt.Fprintf(&buf, `{"id":"row-%d","run_id":"run","step":%d,"prompt":"what is 2+2?","completion":"4","reward":0.5,"done":true,"metadata":"{}","created_at":"2025-01-01T00:00:00Z"}`, i, i)
	}
	buf.WriteString("]")
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.DecodeJSON(buf.Bytes(), 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBuild(b *testing.B) {
	c := testCodec(b, target.KindRollout)
	rows := make([]Row, 1000)
	seqs := make([]int64, len(rows))
	for i := range rows {
		key := fmt.Sprintf("row-%d", i)
		rows[i] = Row{Key: key, Values: []any{key, "run", int64(i), "prompt", "completion", 0.5, true, []byte("x"), "{}", time.Unix(0, 0).UTC()}}
		seqs[i] = int64(i)
	}
	b.ReportAllocs()
	for b.Loop() {
		rec, err := c.Build(nil, rows, seqs, "s", nil)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
}
