package rowcodec

import (
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"

	"github.com/walkeeper/walkeeper/target"
)

// Codec: a store's rows in their three forms, JSON (json.go, values.go), Row and Arrow
// (arrow.go, convert.go, record.go).

// System columns appended, non-null and in this order, to every stored record's user fields.
const (
	ColSeq     = "_seq"     // int64: the row's write sequence; newest wins
	ColShard   = "_shard"   // string: the shard that wrote the row; breaks sequence ties
	ColDeleted = "_deleted" // bool: the row is a tombstone
)

// MetadataKind is the Arrow schema metadata key holding the store kind of a record.
const MetadataKind = "walkeeper.kind"

// datagenNS is the UUID namespace of derived datagen event ids.
var datagenNS = uuid.NewSHA1(uuid.NameSpaceURL, []byte("https://walkeeper.dev/datagen"))

// DatagenEventID is the event_id of a datagen row, a SHA-1 UUID of item_id, checkpoint and
// ordinal, so a retried append of the same row lands on the same key.
func DatagenEventID(itemID, checkpoint string, ordinal int64) string {
	name := make([]byte, 0, len(itemID)+len(checkpoint)+22)
	name = append(name, itemID...)
	name = append(name, 0)
	name = append(name, checkpoint...)
	name = append(name, 0)
	name = strconv.AppendInt(name, ordinal, 10)
	return uuid.NewSHA1(datagenNS, name).String()
}

// Row is one validated row: Values aligned with Schema.Fields, holding string, int64,
// float64, bool, []byte, time.Time (UTC, microsecond precision) or nil for null. Key repeats
// the key field's value. A tombstone (see Codec.Build) needs only Key.
type Row struct {
	Key    string
	Values []any
}

// Codec converts rows of one store between JSON, Row and Arrow; immutable and concurrency-safe.
type Codec struct {
	kind   target.Kind
	schema Schema
	names  []string // of schema.Fields, in order
	index  map[string]int
	key    int
	arrow  *arrow.Schema

	// datagen only: the fields the event id is derived from.
	itemIdx, checkpointIdx, ordinalIdx int
}

// NewCodec returns the codec of a store of kind k with schema s. s is checked with
// ValidateSchema; for rollout and datagen an empty s means the fixed schema.
func NewCodec(k target.Kind, s Schema) (*Codec, error) {
	if _, err := target.ParseKind(string(k)); err != nil {
		return nil, err
	}
	if (k == target.KindRollout || k == target.KindDatagen) && len(s.Fields) == 0 {
		s = fixedSchema(k)
	}
	if err := ValidateSchema(k, s); err != nil {
		return nil, err
	}
	s = s.clone()
	n := len(s.Fields)
	c := &Codec{
		kind:   k,
		schema: s,
		names:  make([]string, n),
		index:  make(map[string]int, n),
	}
	fields := make([]arrow.Field, 0, n+3)
	for i, f := range s.Fields {
		c.names[i] = f.Name
		c.index[f.Name] = i
		// Every user column is nullable in Arrow: tombstones carry only the key.
		fields = append(fields, arrow.Field{Name: f.Name, Type: f.Type.ArrowType(), Nullable: true})
	}
	fields = append(fields,
		arrow.Field{Name: ColSeq, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: ColShard, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColDeleted, Type: arrow.FixedWidthTypes.Boolean},
	)
	md := arrow.NewMetadata([]string{MetadataKind}, []string{string(k)})
	c.arrow = arrow.NewSchema(fields, &md)
	c.key = c.index[KeyField(k)]
	if k == target.KindDatagen {
		c.itemIdx, c.checkpointIdx, c.ordinalIdx = c.index["item_id"], c.index["checkpoint"], c.index["ordinal"]
	}
	return c, nil
}

// Schema returns a copy of the user schema.
func (c *Codec) Schema() Schema { return c.schema.clone() }

// ArrowSchema returns the shared, immutable schema of stored records: the user fields (all
// nullable), then _seq, _shard and _deleted, with metadata {"walkeeper.kind": kind}.
func (c *Codec) ArrowSchema() *arrow.Schema { return c.arrow }

// KeyIndex returns the index of the key column in ArrowSchema (and in Schema().Fields).
func (c *Codec) KeyIndex() int { return c.key }
