package store

import "github.com/walkeeper/walkeeper/store/rowcodec"

// A store's rows and schema are package rowcodec's (which also turns them into JSON and
// Arrow and back). These aliases keep the engine and its callers reading store.Row and
// store.Schema: one type under a second, package-local spelling.
type (
	Row       = rowcodec.Row
	Schema    = rowcodec.Schema
	Field     = rowcodec.Field
	FieldType = rowcodec.FieldType
)

// The field types; see package rowcodec.
const (
	TypeString    = rowcodec.TypeString
	TypeInt64     = rowcodec.TypeInt64
	TypeFloat64   = rowcodec.TypeFloat64
	TypeBool      = rowcodec.TypeBool
	TypeBinary    = rowcodec.TypeBinary
	TypeTimestamp = rowcodec.TypeTimestamp
)
