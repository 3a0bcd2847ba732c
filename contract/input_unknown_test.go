package contract

import (
	"encoding/json"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// A member no field takes is named with its path, top-level, nested or in an array element,
// matched as encoding/json matches (so what decodes is never named); at most
// MaxUnknownFieldNames names, each clipped, and every one counted.
func TestUnknownInputFields(t *testing.T) {
	long := strings.Repeat("x", 1000)
	for _, c := range []struct {
		name  string
		dst   any
		in    string
		want  []string
		total int
	}{
		{"top-level", &MergeWalInput{}, `{"target":"generic:gs","max_pases":3}`, []string{"max_pases"}, 1},
		{"nested", &SweepWindowInput{}, `{"sweep":{"start_batchh":2,"start_batch":3},"interval":1}`, []string{"sweep.start_batchh"}, 1},
		{"array element", &MergeWalInput{}, `{"target":"generic:gs","carry":{"runs":1,"shards":[{"shard":"a"},{"shardd":"b","passes":2}]}}`,
			[]string{"carry.shards[1].shardd"}, 1},
		{"deeper array", &ReconcileDemandInput{}, `{"problems":[{"target":"a","error":"e","why":{"not":"walked"}}],"cursor":{"kindx":1}}`,
			[]string{"problems[0].why", "cursor.kindx"}, 2},
		{"names fold as encoding/json does", &MergeWalInput{}, `{"Target":"generic:gs","MAX_PASSES":3,"Carry":{"Shards":[{"SHARD":"a"}]}}`, nil, 0},
		{"an escaped name", &MergeWalInput{}, `{"max\u005fpases":3,"max\u005fpasses":2}`, []string{"max_pases"}, 1},
		{"a time takes what it is given", &SweepWindowInput{}, `{"carry":{"origin":"2026-01-01T00:00:00Z","totals":{"roundz":1}}}`,
			[]string{"carry.totals.roundz"}, 1},
		{"a wrong type is Validate's, not unknown", &SweepWindowInput{}, `{"sweep":[1,2],"carry":"x","interval":{"a":1}}`, nil, 0},
		{"bounded", &CompactBaseInput{}, `{"a":1,"b":[{"x":1}],"c":{"y":2},"d":"}","e":null,"f":true,"g":-1.5e3}`,
			[]string{"a", "b", "c", "d"}, 7},
		{"clipped", &MergeWalInput{}, `{"carry":{"shards":[{"` + long + `":1}]}}`, []string{"carry.shards[0]." + long[:quotedMax] + "…"}, 1},
		{"not an object", &MergeWalInput{}, `[{"x":1}]`, nil, 0},
		{"none", &MergeWalTickInput{}, ` { "target" : "generic:gs" } `, nil, 0},
	} {
		names, total := UnknownInputFields([]byte(c.in), c.dst)
		if !reflect.DeepEqual(names, c.want) || total != c.total {
			t.Errorf("%s: %q, %d; want %q, %d", c.name, names, total, c.want, c.total)
		}
	}

	// Bytes that are not JSON stop the walk; none panics or loops.
	in := `{"target":"generic:gs","carry":{"shards":[{"shard":"a","x\"y":[1,{"z":"]"}]}]},"max_pases":3}`
	for i := range len(in) {
		UnknownInputFields([]byte(in[:i]), &MergeWalInput{})
		UnknownInputFields([]byte(in[:i]+"}"+in[i:]), &MergeWalInput{})
	}
}

// What a build writes into an input, every field set (as TestWireShape fills it), reports
// nothing.
func TestUnknownInputFieldsOfWrittenInputs(t *testing.T) {
	for _, p := range workflowPayloads {
		in := filled(reflect.TypeOf(p[0]))
		data, err := json.Marshal(in.Interface())
		if err != nil {
			t.Fatal(err)
		}
		if names, total := UnknownInputFields(data, in.Addr().Interface()); total != 0 {
			t.Errorf("%T %s: %q", p[0], data, names)
		}
	}
}

// The walk allocates only the names it reports, however long the input.
func TestUnknownInputFieldsAllocatesOnlyItsNames(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"carry":{"shards":[`)
	for i := range 20000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"shard":"s` + strconv.Itoa(i) + `","passes":1,"x":{"deep":[1,2,{"y":"z"}]}}`)
	}
	b.WriteString(`]}}`)
	data := []byte(b.String())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, total := UnknownInputFields(data, &MergeWalInput{})
	runtime.ReadMemStats(&after)
	if total != 20000 {
		t.Fatalf("%d unknown", total)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<10 {
		t.Errorf("%d bytes allocated walking %d", got, len(data))
	}
}
