package store

import "github.com/walkeeper/walkeeper/store/rowcodec"

// A store's rows and schema are package rowcodec's; these aliases keep callers reading
// store.Row and store.Schema.
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
