package manifest

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The codec's member tables repeat each object's json tags (codec.go). A field added to a
// manifest type but not to its table would be dropped by the fast encoder without a word, so
// this holds every table to its type: the same members, in declaration order, with the same
// omitempty. Quarantined is the one member the tables leave to encoding/json.
func TestFieldTablesMatchJSONTags(t *testing.T) {
	for _, c := range []struct {
		typ    reflect.Type
		fields []field
	}{
		{reflect.TypeFor[Shard](), shardFields(&Shard{}, nil)},
		{reflect.TypeFor[Gen](), genFields(&Gen{}, nil)},
		{reflect.TypeFor[Base](), baseFields(&Base{}, nil)},
		{reflect.TypeFor[Run](), runFields(&Run{}, nil)},
	} {
		var want, got []string
		for sf := range c.typ.Fields() {
			name, opts, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "-" || sf.Name == "Quarantined" {
				continue
			}
			want = append(want, name+map[bool]string{true: ",omitempty"}[opts == "omitempty"])
		}
		for _, f := range c.fields {
			got = append(got, f.name+map[bool]string{true: ",omitempty"}[f.omitEmpty])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the codec's table lists %v, the json tags %v", c.typ.Name(), got, want)
		}
		if len(c.fields) > maxFields {
			t.Errorf("%s: %d members, more than maxFields (%d)", c.typ.Name(), len(c.fields), maxFields)
		}
	}
}
