package contract

import (
	"reflect"
	"testing"
)

// UnknownInputFields reads what anyone typed into a workflow start: whatever the bytes, it
// returns, without a panic, at most MaxUnknownFieldNames clipped names of the total it counts.
func FuzzUnknownInputFields(f *testing.F) {
	for _, s := range []string{
		`{"target":"generic:gs","max_pases":3}`,
		`{"sweep":{"start_batchh":2},"interval":1}`,
		`{"carry":{"shards":[{"shardd":"b"},[[[{}]]]]},"K\u212a":{"a":[1,{"b":"\""}]}}`,
		`[{"a":`, `{"target":`, `{"\\":1,`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, p := range workflowPayloads {
			names, total := UnknownInputFields(data, reflect.New(reflect.TypeOf(p[0])).Interface())
			if len(names) > MaxUnknownFieldNames || len(names) > total {
				t.Fatalf("%d names of %d", len(names), total)
			}
			for _, n := range names {
				if len(n) > 4*quotedMax+16 {
					t.Fatalf("name of %d bytes not clipped", len(n))
				}
			}
		}
	})
}
