package jsonscan

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

type Inner struct {
	Deep int `json:"deep"`
}

type fieldsProbe struct {
	*Inner
	Plain   string
	Tagged  int `json:"tagged,omitempty"`
	Skipped int `json:"-"`
	hidden  int
	Dash    string `json:"-,"`
}

// Fields must name exactly the members encoding/json decodes: each named member of a full
// object lands, and nothing else is listed.
func TestFieldsAreWhatEncodingJSONDecodes(t *testing.T) {
	got := map[string]bool{}
	for _, f := range Fields(reflect.TypeFor[fieldsProbe]()) {
		got[f.Name] = true
	}
	want := map[string]bool{"deep": true, "Plain": true, "tagged": true, "-": true}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Fields = %v, want %v", got, want)
	}
	var p fieldsProbe
	if err := json.Unmarshal([]byte(`{"deep":1,"Plain":"x","tagged":2,"-":"d","Skipped":3,"hidden":4}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.Inner == nil || p.Deep != 1 || p.Plain != "x" || p.Tagged != 2 || p.Dash != "d" || p.Skipped != 0 || p.hidden != 0 {
		t.Fatalf("encoding/json decoded %+v: the probe no longer matches its rules", p)
	}
}

func TestDecodesItself(t *testing.T) {
	for typ, want := range map[reflect.Type]bool{
		reflect.TypeFor[time.Time]():       true, // a pointer method
		reflect.TypeFor[json.RawMessage](): true,
		reflect.TypeFor[fieldsProbe]():     false,
		reflect.TypeFor[int]():             false,
	} {
		if got := DecodesItself(typ); got != want {
			t.Errorf("DecodesItself(%v) = %v, want %v", typ, got, want)
		}
	}
}
