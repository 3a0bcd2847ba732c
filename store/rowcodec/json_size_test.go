package rowcodec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/target"
)

// jsonText is v as the HTTP list pages encode it: encoding/json without HTML escaping.
func jsonText(t *testing.T, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatalf("encode %v: %v", v, err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}

// RowJSONBytes and RowToJSONBytes are exactly the length of the JSON text of the row that
// RowJSON and RowToJSON render, for every field type, nulls, strings that need escaping
// (quotes, control characters, invalid UTF-8, U+2028, HTML) and floats on both sides of the
// exponent cutoffs.
func TestRowJSONBytesIsTheLengthOfTheJSONText(t *testing.T) {
	c := testCodec(t, target.KindGeneric)
	sch := c.Schema()
	strs := []string{"", "plain", `q"uote\back`, "\b\f\n\r\t\x00\x01\x1f\x7f", "<a>&amp;</a>",
		"\xff\xfe bad \xc3", "line\u2028para\u2029", "日本語 ünïcödé 🙂", "\xed\xa0\x80"}
	floats := []float64{0, math.Copysign(0, -1), 1, -1.5, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21,
		123456789e15, -2.5e300, math.MaxFloat64, math.SmallestNonzeroFloat64, 0.1}
	rng := rand.New(rand.NewPCG(3, 5))
	var rows []Row
	for i := range 300 {
		id := fmt.Sprintf("k%03d", i)
		v := []any{id, nil, nil, nil, nil, nil, nil, int64(i)}
		if i%7 != 0 {
			raw := make([]byte, rng.IntN(40))
			for j := range raw {
				raw[j] = byte(rng.IntN(256))
			}
			v[1] = rng.Int64() - math.MaxInt64/2
			v[2] = floats[i%len(floats)]
			v[3] = i%2 == 0
			v[4] = strs[i%len(strs)] + string(raw)
			v[5] = raw
			v[6] = time.Unix(rng.Int64N(1<<33), rng.Int64N(1e6)*1000).UTC()
		}
		rows = append(rows, Row{Key: id, Values: v})
	}
	seqs := make([]int64, len(rows))
	rec, _ := buildChecked(t, c, nil, rows, seqs, "s", nil)
	defer rec.Release()
	for i, r := range rows {
		if got, want := c.RowJSONBytes(rec, i), int64(len(jsonText(t, c.RowJSON(rec, i)))); got != want {
			t.Errorf("row %d: RowJSONBytes = %d, the JSON text is %d bytes: %s", i, got, want, jsonText(t, c.RowJSON(rec, i)))
		}
		if got, want := RowToJSONBytes(sch, r), int64(len(jsonText(t, RowToJSON(sch, r)))); got != want {
			t.Errorf("row %d: RowToJSONBytes = %d, the JSON text is %d bytes", i, got, want)
		}
	}
	if n := c.RowJSONBytes(rec, len(rows)); n != 0 {
		t.Errorf("a row out of range measures %d bytes, want 0", n)
	}
}
