package rowcodec

import (
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/walkeeper/walkeeper/target"
)

// FieldType is the type of one user field. The set is closed: the Type constants below.
type FieldType string

// The field types, stored as arrowTypes says.
const (
	TypeString    FieldType = "string"
	TypeInt64     FieldType = "int64"
	TypeFloat64   FieldType = "float64"
	TypeBool      FieldType = "bool"
	TypeBinary    FieldType = "binary"    // base64 in JSON
	TypeTimestamp FieldType = "timestamp" // RFC 3339 in JSON
)

// timestampType is the Arrow type of timestamp fields: microseconds, UTC.
var timestampType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

var arrowTypes = map[FieldType]arrow.DataType{
	TypeString:    arrow.BinaryTypes.String,
	TypeInt64:     arrow.PrimitiveTypes.Int64,
	TypeFloat64:   arrow.PrimitiveTypes.Float64,
	TypeBool:      arrow.FixedWidthTypes.Boolean,
	TypeBinary:    arrow.BinaryTypes.Binary,
	TypeTimestamp: timestampType,
}

// ArrowType returns the Arrow type t is stored as, or nil for an unknown type.
func (t FieldType) ArrowType() arrow.DataType { return arrowTypes[t] }

// Field is one user field of a store schema.
type Field struct {
	Name     string    `json:"name"`
	Type     FieldType `json:"type"`
	Nullable bool      `json:"nullable,omitempty"`
}

// Schema is the ordered list of user fields of a store. It is the JSON body of a generic
// create: {"fields":[{"name":"id","type":"string"},{"name":"n","type":"int64","nullable":true}]}.
type Schema struct {
	Fields []Field `json:"fields"`
}

// Equal reports whether s and o have the same fields (name, type, nullability) in order.
func (s Schema) Equal(o Schema) bool { return slices.Equal(s.Fields, o.Fields) }

// clone returns a copy of s that shares no memory with it.
func (s Schema) clone() Schema { return Schema{Fields: slices.Clone(s.Fields)} }

// RolloutSchema returns a fresh copy of the fixed schema of rollout stores (key "id").
func RolloutSchema() Schema {
	return Schema{Fields: []Field{
		{Name: "id", Type: TypeString},
		{Name: "run_id", Type: TypeString, Nullable: true},
		{Name: "step", Type: TypeInt64, Nullable: true},
		{Name: "prompt", Type: TypeString, Nullable: true},
		{Name: "completion", Type: TypeString, Nullable: true},
		{Name: "reward", Type: TypeFloat64, Nullable: true},
		{Name: "done", Type: TypeBool, Nullable: true},
		{Name: "binary_payload", Type: TypeBinary, Nullable: true},
		{Name: "metadata", Type: TypeString, Nullable: true},
		{Name: "created_at", Type: TypeTimestamp, Nullable: true},
	}}
}

// DatagenSchema returns a fresh copy of the fixed schema of datagen stores (key "event_id",
// derived when a row leaves it out: DatagenEventID).
func DatagenSchema() Schema {
	return Schema{Fields: []Field{
		{Name: "event_id", Type: TypeString},
		{Name: "item_id", Type: TypeString},
		{Name: "checkpoint", Type: TypeString},
		{Name: "ordinal", Type: TypeInt64},
		{Name: "payload", Type: TypeString, Nullable: true},
		{Name: "label", Type: TypeString, Nullable: true},
		{Name: "score", Type: TypeFloat64, Nullable: true},
		{Name: "created_at", Type: TypeTimestamp, Nullable: true},
	}}
}

// KeyField returns the name of the key field of kind k ("" for an unknown kind).
func KeyField(k target.Kind) string {
	switch k {
	case target.KindRollout, target.KindGeneric:
		return "id"
	case target.KindDatagen:
		return "event_id"
	}
	return ""
}

// Limits on generic schemas.
const (
	maxFields       = 256
	maxFieldNameLen = 128
)

// ValidateSchema checks a declared schema for kind k: generic takes 1..256 unique identifier
// fields not starting with "_" of known types, with a non-null string "id"; rollout and
// datagen must equal their fixed schema. Errors wrap ErrInvalidInput naming the field.
func ValidateSchema(k target.Kind, s Schema) error {
	switch k {
	case target.KindRollout, target.KindDatagen:
		fixed := fixedSchema(k)
		if !s.Equal(fixed) {
			return invalidf("%s stores have a fixed schema; %s", k, schemaDiff(fixed, s))
		}
		return nil
	case target.KindGeneric:
	default:
		return invalidf("unknown store kind %q", target.Clip(string(k)))
	}
	n := len(s.Fields)
	if n == 0 {
		return invalidf("schema has no fields; a generic schema needs at least the key field \"id\" (string)")
	}
	if n > maxFields {
		return invalidf("schema has %d fields, at most %d allowed", n, maxFields)
	}
	seen := make(map[string]int, n)
	key := -1
	for i, f := range s.Fields {
		if p := identProblem(f.Name); p != "" {
			return invalidf("schema field %d %q: %s", i, target.Clip(f.Name), p)
		}
		if j, dup := seen[f.Name]; dup {
			return invalidf("schema field %d %q: duplicate of field %d", i, f.Name, j)
		}
		seen[f.Name] = i
		if f.Type.ArrowType() == nil {
			return invalidf("schema field %q: unknown type %q (want one of string, int64, float64, bool, binary, timestamp)", f.Name, target.Clip(string(f.Type)))
		}
		if f.Name == "id" {
			key = i
		}
	}
	if key < 0 {
		return invalidf("schema has no key field \"id\" (type string, non-null)")
	}
	if f := s.Fields[key]; f.Type != TypeString || f.Nullable {
		return invalidf("schema field \"id\" is the key: want type string, non-null; got type %s, nullable %t", f.Type, f.Nullable)
	}
	return nil
}

// fixedSchema returns the fixed schema of rollout and datagen stores.
func fixedSchema(k target.Kind) Schema {
	if k == target.KindDatagen {
		return DatagenSchema()
	}
	return RolloutSchema()
}

// identProblem describes what is wrong with a generic field name, or returns "".
func identProblem(name string) string {
	if name == "" {
		return "empty name"
	}
	if len(name) > maxFieldNameLen {
		return fmt.Sprintf("name is %d bytes long, at most %d allowed", len(name), maxFieldNameLen)
	}
	if name[0] == '_' {
		return `names starting with "_" are reserved for system columns`
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || i > 0 && c >= '0' && c <= '9'
		if !ok {
			return fmt.Sprintf("byte %q at offset %d is not allowed (want [A-Za-z_][A-Za-z0-9_]*)", c, i)
		}
	}
	return ""
}

// schemaDiff describes the first difference between the wanted and the given schema.
func schemaDiff(want, got Schema) string {
	for i := 0; i < len(want.Fields) && i < len(got.Fields); i++ {
		if w, g := want.Fields[i], got.Fields[i]; w != g {
			return fmt.Sprintf("field %d: want %s, got %s", i, describeField(w), describeField(g))
		}
	}
	if len(got.Fields) < len(want.Fields) {
		return fmt.Sprintf("want %d fields, got %d (missing %q)", len(want.Fields), len(got.Fields), want.Fields[len(got.Fields)].Name)
	}
	return fmt.Sprintf("want %d fields, got %d (unexpected %q)", len(want.Fields), len(got.Fields), target.Clip(got.Fields[len(want.Fields)].Name))
}

func describeField(f Field) string {
	null := "non-null"
	if f.Nullable {
		null = "nullable"
	}
	return fmt.Sprintf("%q %s %s", target.Clip(f.Name), target.Clip(string(f.Type)), null)
}
