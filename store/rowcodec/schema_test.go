package rowcodec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/stretchr/testify/assert"

	"github.com/walkeeper/walkeeper/target"
)

func TestFixedSchemas(t *testing.T) {
	wantRollout := []Field{
		{"id", TypeString, false}, {"run_id", TypeString, true}, {"step", TypeInt64, true},
		{"prompt", TypeString, true}, {"completion", TypeString, true}, {"reward", TypeFloat64, true},
		{"done", TypeBool, true}, {"binary_payload", TypeBinary, true}, {"metadata", TypeString, true},
		{"created_at", TypeTimestamp, true},
	}
	if !RolloutSchema().Equal(Schema{Fields: wantRollout}) {
		t.Errorf("RolloutSchema() = %+v", RolloutSchema())
	}
	wantDatagen := []Field{
		{"event_id", TypeString, false}, {"item_id", TypeString, false}, {"checkpoint", TypeString, false},
		{"ordinal", TypeInt64, false}, {"payload", TypeString, true}, {"label", TypeString, true},
		{"score", TypeFloat64, true}, {"created_at", TypeTimestamp, true},
	}
	if !DatagenSchema().Equal(Schema{Fields: wantDatagen}) {
		t.Errorf("DatagenSchema() = %+v", DatagenSchema())
	}
	// Fresh copies: mutating one never changes the next.
	s := RolloutSchema()
	s.Fields[0] = Field{Name: "x"}
	if RolloutSchema().Fields[0].Name != "id" {
		t.Error("RolloutSchema shares its slice")
	}
	for k, want := range map[target.Kind]string{target.KindRollout: "id", target.KindGeneric: "id", target.KindDatagen: "event_id", "bogus": ""} {
		if got := KeyField(k); got != want {
			t.Errorf("KeyField(%q) = %q, want %q", k, got, want)
		}
	}
}

func TestFieldTypes(t *testing.T) {
	want := map[FieldType]arrow.DataType{
		TypeString:    arrow.BinaryTypes.String,
		TypeInt64:     arrow.PrimitiveTypes.Int64,
		TypeFloat64:   arrow.PrimitiveTypes.Float64,
		TypeBool:      arrow.FixedWidthTypes.Boolean,
		TypeBinary:    arrow.BinaryTypes.Binary,
		TypeTimestamp: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"},
	}
	for ft, wantType := range want {
		if !arrow.TypeEqual(ft.ArrowType(), wantType) {
			t.Errorf("%s: ArrowType %v", ft, ft.ArrowType())
		}
	}
	for _, ft := range []FieldType{"", "int", "INT64", "float", "timestamp[us]", "json"} {
		if ft.ArrowType() != nil {
			t.Errorf("%q is valid", ft)
		}
	}
}

func TestSchemaEqual(t *testing.T) {
	a := Schema{Fields: []Field{{Name: "id", Type: TypeString}, {Name: "n", Type: TypeInt64, Nullable: true}}}
	if !a.Equal(a.clone()) || !(Schema{}).Equal(Schema{Fields: []Field{}}) {
		t.Error("equal schemas compare unequal")
	}
	for _, b := range []Schema{
		{Fields: a.Fields[:1]},
		{Fields: []Field{{Name: "id", Type: TypeString}, {Name: "n", Type: TypeInt64}}},
		{Fields: []Field{{Name: "id", Type: TypeString}, {Name: "m", Type: TypeInt64, Nullable: true}}},
		{Fields: []Field{{Name: "id", Type: TypeString}, {Name: "n", Type: TypeFloat64, Nullable: true}}},
		{Fields: []Field{{Name: "n", Type: TypeInt64, Nullable: true}, {Name: "id", Type: TypeString}}},
	} {
		if a.Equal(b) || b.Equal(a) {
			t.Errorf("%+v equals %+v", a, b)
		}
	}
}

func TestSchemaJSON(t *testing.T) {
	// The generic create body of docs/API.md.
	body := `{"fields":[{"name":"id","type":"string"},{"name":"n","type":"int64","nullable":true}]}`
	var s Schema
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	want := Schema{Fields: []Field{{Name: "id", Type: TypeString}, {Name: "n", Type: TypeInt64, Nullable: true}}}
	if !s.Equal(want) {
		t.Fatalf("decoded %+v", s)
	}
	if err := ValidateSchema(target.KindGeneric, s); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	if string(b) != body {
		t.Errorf("Marshal = %s, want %s", b, body)
	}
}

func TestValidateSchema(t *testing.T) {
	id := Field{Name: "id", Type: TypeString}
	gen := func(fs ...Field) Schema { return Schema{Fields: fs} }
	many := func(n int) Schema {
		s := gen(id)
		for i := 1; i < n; i++ {
			s.Fields = append(s.Fields, Field{Name: fmt.Sprintf("f%d", i), Type: TypeInt64, Nullable: true})
		}
		return s
	}
	allTypes := gen(id, Field{"s", TypeString, true}, Field{"n", TypeInt64, false}, Field{"f", TypeFloat64, true},
		Field{"b", TypeBool, true}, Field{"bin", TypeBinary, true}, Field{"ts", TypeTimestamp, true})
	name128 := "a" + strings.Repeat("b", 127)

	valid := []struct {
		name string
		k    target.Kind
		s    Schema
	}{
		{"minimal", target.KindGeneric, gen(id)},
		{"all types", target.KindGeneric, allTypes},
		{"id not first", target.KindGeneric, gen(Field{"n", TypeInt64, true}, id)},
		{"256 fields", target.KindGeneric, many(256)},
		{"128-byte name", target.KindGeneric, gen(id, Field{name128, TypeBool, true})},
		{"underscore inside", target.KindGeneric, gen(id, Field{"a_b_", TypeBool, true}, Field{"A9", TypeBool, true})},
		{"case differs", target.KindGeneric, gen(id, Field{"ID", TypeString, true})},
		{"rollout fixed", target.KindRollout, RolloutSchema()},
		{"datagen fixed", target.KindDatagen, DatagenSchema()},
	}
	for _, v := range valid {
		assert.NoError(t, ValidateSchema(v.k, v.s), v.name)
	}

	modRollout := RolloutSchema()
	modRollout.Fields[5].Type = TypeString
	invalid := []struct {
		name string
		k    target.Kind
		s    Schema
		want string
	}{
		{"no fields", target.KindGeneric, Schema{}, "no fields"},
		{"257 fields", target.KindGeneric, many(257), "257 fields"},
		{"missing id", target.KindGeneric, gen(Field{"n", TypeInt64, true}), `no key field "id"`},
		{"id int64", target.KindGeneric, gen(Field{"id", TypeInt64, false}), "want type string, non-null"},
		{"id nullable", target.KindGeneric, gen(Field{"id", TypeString, true}), "want type string, non-null"},
		{"duplicate", target.KindGeneric, gen(id, Field{"n", TypeInt64, true}, Field{"n", TypeString, true}), `field 2 "n": duplicate of field 1`},
		{"duplicate id", target.KindGeneric, gen(id, id), "duplicate"},
		{"system prefix", target.KindGeneric, gen(id, Field{"_seq", TypeInt64, true}), "reserved for system columns"},
		{"underscore", target.KindGeneric, gen(id, Field{"_", TypeInt64, true}), "reserved"},
		{"leading digit", target.KindGeneric, gen(id, Field{"1a", TypeInt64, true}), "not allowed"},
		{"dash", target.KindGeneric, gen(id, Field{"a-b", TypeInt64, true}), "not allowed"},
		{"dot", target.KindGeneric, gen(id, Field{"a.b", TypeInt64, true}), "not allowed"},
		{"space", target.KindGeneric, gen(id, Field{"a b", TypeInt64, true}), "not allowed"},
		{"unicode", target.KindGeneric, gen(id, Field{"é", TypeInt64, true}), "not allowed"},
		{"empty name", target.KindGeneric, gen(id, Field{"", TypeInt64, true}), "empty name"},
		{"129-byte name", target.KindGeneric, gen(id, Field{name128 + "c", TypeInt64, true}), "129 bytes"},
		{"unknown type", target.KindGeneric, gen(id, Field{"n", "int", true}), `unknown type "int"`},
		{"type case", target.KindGeneric, gen(id, Field{"n", "INT64", true}), "unknown type"},
		{"empty type", target.KindGeneric, gen(id, Field{"n", "", true}), "unknown type"},
		{"rollout empty", target.KindRollout, Schema{}, "fixed schema"},
		{"rollout changed", target.KindRollout, modRollout, `field 5: want "reward" float64 nullable, got "reward" string nullable`},
		{"rollout extra", target.KindRollout, gen(append(RolloutSchema().Fields, Field{"x", TypeBool, true})...), `unexpected "x"`},
		{"rollout short", target.KindRollout, gen(RolloutSchema().Fields[:3]...), `missing "prompt"`},
		{"datagen as generic", target.KindDatagen, gen(id), "fixed schema"},
		{"unknown kind", "bogus", gen(id), "unknown store kind"},
	}
	for _, c := range invalid {
		assertErr(t, ValidateSchema(c.k, c.s), ErrInvalidInput, c.want, c.name)
	}
}

// FuzzValidateSchema decodes a schema from JSON and validates it for a kind. It must never
// panic, and a schema it accepts must make a working codec whose Arrow schema has the user
// fields plus the system columns, and rows holding just the key (when the other fields are
// nullable) must build.
func FuzzValidateSchema(f *testing.F) {
	f.Add(uint8(1), []byte(`{"fields":[{"name":"id","type":"string"},{"name":"n","type":"int64","nullable":true}]}`))
	f.Add(uint8(1), []byte(`{"fields":[{"name":"id","type":"string","nullable":true}]}`))
	f.Add(uint8(1), []byte(`{"fields":[{"name":"id","type":"string"},{"name":"_seq","type":"int64"}]}`))
	f.Add(uint8(1), []byte(`{"fields":[{"name":"id","type":"string"},{"name":"id","type":"string"}]}`))
	f.Add(uint8(1), []byte(`{"fields":[]}`))
	f.Add(uint8(0), []byte(`{"fields":[{"name":"id","type":"string"}]}`))
	f.Add(uint8(2), []byte(`{"fields":[{"name":"event_id","type":"string"},{"name":"item_id","type":"string"},{"name":"checkpoint","type":"string"},{"name":"ordinal","type":"int64"},{"name":"payload","type":"string","nullable":true},{"name":"label","type":"string","nullable":true},{"name":"score","type":"float64","nullable":true},{"name":"created_at","type":"timestamp","nullable":true}]}`))
	f.Fuzz(func(t *testing.T, kindSel uint8, body []byte) {
		k := target.Kinds[int(kindSel)%len(target.Kinds)]
		var s Schema
		if json.Unmarshal(body, &s) != nil {
			return
		}
		err := ValidateSchema(k, s)
		if err != nil {
			if !errors.Is(err, ErrInvalidInput) {
				t.Fatalf("error %v does not wrap ErrInvalidInput", err)
			}
			if _, cerr := NewCodec(k, s); cerr == nil && len(s.Fields) != 0 {
				t.Fatalf("NewCodec accepted a schema ValidateSchema refused: %v", err)
			}
			return
		}
		c, err := NewCodec(k, s)
		if err != nil {
			t.Fatalf("NewCodec refused a valid schema: %v", err)
		}
		if !c.Schema().Equal(s) || !s.Equal(s) {
			t.Fatal("codec schema differs")
		}
		requireArrowSchema(t, c, k, s)
		seen := map[string]bool{}
		for _, fd := range s.Fields {
			if seen[fd.Name] || strings.HasPrefix(fd.Name, "_") || fd.Type.ArrowType() == nil {
				t.Fatalf("accepted bad field %+v", fd)
			}
			seen[fd.Name] = true
		}
		if k == target.KindGeneric {
			rec, _ := buildChecked(t, c, nil, []Row{{Key: "k"}}, []int64{1}, "s", []bool{true})
			defer rec.Release()
		}
	})
}
