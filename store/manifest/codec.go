package manifest

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/walkeeper/walkeeper/store/internal/jsonscan"
)

// The shard manifest's JSON codec without reflection. A shard manifest lists every pending
// generation and is encoded on every seal and decoded by every reader that meets a new
// version (the seals of other writers, a snapshot of every shard), so encoding/json's
// reflection and its second validating pass over the input were most of a 200-writer
// table's CPU (docs/benchmarks/incident.md, "200 shards again").
//
// The format does not change (docs/FORMAT.md): appendShardManifest writes exactly the bytes
// json.Marshal writes, and UnmarshalShard reads exactly what json.Unmarshal reads for
// the shape walkeeper writes. Anything else — whitespace from a pretty-printer aside, an
// escaped or non-ASCII string, an unknown field, a null, a number json would refuse or
// round, a quarantined list — makes the fast path give up and encoding/json decide, so
// outside writers, older and newer releases keep their meaning. TestShardManifestCodec and
// FuzzShardManifestCodec hold both halves to encoding/json.

// EncodeShard is json.Marshal(m), byte for byte.
func EncodeShard(m *Shard) ([]byte, error) {
	if len(m.Quarantined) > 0 {
		return json.Marshal(m)
	}
	if b, ok := appendShardManifest(m); ok {
		return b, nil
	}
	return json.Marshal(m) // a time MarshalJSON refuses: let it say so
}

// appendShardManifest is EncodeShard's fast path; false when a time does not
// encode (time.Time.MarshalJSON refuses it).
//
// REQUIRES: m.Quarantined is empty.
func appendShardManifest(m *Shard) ([]byte, bool) {
	ok := true
	b := make([]byte, 0, 160+len(m.Flushed)*256)
	b = append(b, `{"shard":`...)
	b = appendJSONString(b, m.Shard)
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, m.Version, 10)
	b = append(b, `,"writer_epoch":`...)
	b = strconv.AppendUint(b, m.WriterEpoch, 10)
	b = append(b, `,"next_generation":`...)
	b = strconv.AppendUint(b, m.NextGeneration, 10)
	b = append(b, `,"flushed":`...)
	if m.Flushed == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range m.Flushed {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendGenMeta(b, &m.Flushed[i], &ok)
		}
		b = append(b, ']')
	}
	b = append(b, `,"replay_after":`...)
	b = strconv.AppendUint(b, m.ReplayAfter, 10)
	b = append(b, `,"max_seq":`...)
	b = strconv.AppendInt(b, m.MaxSeq, 10)
	b = append(b, `,"updated_at":`...)
	b = appendJSONTime(b, m.UpdatedAt, &ok)
	return append(b, '}'), ok
}

func appendGenMeta(b []byte, g *Gen, ok *bool) []byte {
	b = append(b, `{"gen":`...)
	b = strconv.AppendUint(b, g.Gen, 10)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, g.Path)
	b = append(b, `,"rows":`...)
	b = strconv.AppendInt(b, g.Rows, 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, g.Bytes, 10)
	b = append(b, `,"min_key":`...)
	b = appendJSONString(b, g.MinKey)
	b = append(b, `,"max_key":`...)
	b = appendJSONString(b, g.MaxKey)
	b = append(b, `,"min_seq":`...)
	b = strconv.AppendInt(b, g.MinSeq, 10)
	b = append(b, `,"max_seq":`...)
	b = strconv.AppendInt(b, g.MaxSeq, 10)
	b = append(b, `,"sealed_at":`...)
	b = appendJSONTime(b, g.SealedAt, ok)
	if g.Checksum != "" {
		b = append(b, `,"crc32c":`...)
		b = appendJSONString(b, g.Checksum)
	}
	return append(b, '}')
}

// plainJSONByte reports whether json.Marshal writes c inside a string as itself: printable
// ASCII other than the quote, the backslash and the three it escapes for HTML.
func plainJSONByte(c byte) bool {
	return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// appendJSONString appends s as json.Marshal writes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainJSONByte(s[i]) {
			raw, _ := json.Marshal(s) // a string always encodes
			return append(b, raw...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONTime appends t as time.Time.MarshalJSON writes it (both are the strict
// RFC 3339 of AppendText); *ok becomes false if t has no such form (a year past 9999).
func appendJSONTime(b []byte, t time.Time, ok *bool) []byte {
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		*ok = false
	}
	return append(b, '"')
}

// UnmarshalShard is json.Unmarshal(raw, m) (m zero on entry): the fast path for
// the shape EncodeShard writes, encoding/json for anything else.
func UnmarshalShard(raw []byte, m *Shard) error {
	p := manifestParser{b: raw}
	if p.shard(m) {
		return nil
	}
	*m = Shard{}
	return json.Unmarshal(raw, m)
}

// manifestParser reads JSON of exactly the shard manifest's shape. Every method returns
// false at the first thing it does not handle the way encoding/json would (the caller then
// lets encoding/json decide); it never reports an error of its own.
type manifestParser struct {
	b []byte
	i int
}

func (p *manifestParser) ws() { p.i = jsonscan.SkipWS(p.b, p.i) }

// tok consumes c (after whitespace).
func (p *manifestParser) tok(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// peek reports whether the next byte (after whitespace) is c, without consuming it.
func (p *manifestParser) peek(c byte) bool {
	p.ws()
	return p.i < len(p.b) && p.b[p.i] == c
}

// str reads a string encoding/json decodes as its bytes (jsonscan.PlainString) and returns
// it without its quotes.
func (p *manifestParser) str() ([]byte, bool) {
	p.ws()
	s, end, ok := jsonscan.PlainString(p.b, p.i)
	p.i = end
	return s, ok
}

func (p *manifestParser) uint(dst *uint64) bool {
	p.ws()
	v, end, ok := jsonscan.Uint(p.b, p.i)
	*dst, p.i = v, end
	return ok
}

func (p *manifestParser) int(dst *int64) bool {
	p.ws()
	v, end, ok := jsonscan.Int(p.b, p.i)
	*dst, p.i = v, end
	return ok
}

func (p *manifestParser) string(dst *string) bool {
	s, ok := p.str()
	*dst = string(s)
	return ok
}

func (p *manifestParser) time(dst *time.Time) bool {
	p.ws()
	start := p.i
	if _, ok := p.str(); !ok {
		return false
	}
	// time.Time's own decoder, as encoding/json calls it.
	return dst.UnmarshalJSON(p.b[start:p.i]) == nil
}

// object reads {"key":value,...}, calling field for each key with the parser at the value.
func (p *manifestParser) object(field func(key []byte) bool) bool {
	if !p.tok('{') {
		return false
	}
	if p.tok('}') {
		return true
	}
	for {
		key, ok := p.str()
		if !ok || !p.tok(':') || !field(key) {
			return false
		}
		if p.tok(',') {
			continue
		}
		return p.tok('}')
	}
}

// document reads a whole manifest: one object, then nothing but white space.
func (p *manifestParser) document(field func(key []byte) bool) bool {
	if !p.object(field) {
		return false
	}
	p.ws()
	return p.i == len(p.b)
}

func (p *manifestParser) shard(m *Shard) bool {
	return p.document(func(key []byte) bool {
		switch string(key) {
		case "shard":
			return p.string(&m.Shard)
		case "version":
			return p.uint(&m.Version)
		case "writer_epoch":
			return p.uint(&m.WriterEpoch)
		case "next_generation":
			return p.uint(&m.NextGeneration)
		case "flushed":
			return p.flushed(&m.Flushed)
		case "replay_after":
			return p.uint(&m.ReplayAfter)
		case "max_seq":
			return p.int(&m.MaxSeq)
		case "updated_at":
			return p.time(&m.UpdatedAt)
		}
		return false // quarantined, or a field this release does not know
	})
}

// flushed reads the generation list. Like encoding/json it reuses no element of an earlier
// value of the same key: a repeated "flushed" replaces the list.
func (p *manifestParser) flushed(dst *[]Gen) bool {
	return parseObjects(p, dst, 64, p.gen)
}

// parseObjects reads a JSON array of objects, each read by elem, into a new slice that
// replaces *dst (as encoding/json does for a repeated key). capHint sizes the slice.
func parseObjects[T any](p *manifestParser, dst *[]T, capHint int, elem func(*T) bool) bool {
	if !p.tok('[') {
		return false
	}
	out := make([]T, 0, capHint)
	if !p.tok(']') {
		for {
			if !p.peek('{') {
				return false
			}
			var v T
			if !elem(&v) {
				return false
			}
			out = append(out, v)
			if p.tok(',') {
				continue
			}
			if !p.tok(']') {
				return false
			}
			break
		}
	}
	*dst = out
	return true
}

func (p *manifestParser) gen(g *Gen) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "gen":
			return p.uint(&g.Gen)
		case "path":
			return p.string(&g.Path)
		case "rows":
			return p.int(&g.Rows)
		case "bytes":
			return p.int(&g.Bytes)
		case "min_key":
			return p.string(&g.MinKey)
		case "max_key":
			return p.string(&g.MaxKey)
		case "min_seq":
			return p.int(&g.MinSeq)
		case "max_seq":
			return p.int(&g.MaxSeq)
		case "sealed_at":
			return p.time(&g.SealedAt)
		case "crc32c":
			return p.string(&g.Checksum)
		}
		return false
	})
}

// The base manifest's codec, on the same terms as the shard manifest's: every prepare reads
// the latest base, which lists every run of the table and every shard's watermark, and a
// round commit makes a new version that each shard's handle decodes once (docs/benchmarks/incident.md,
// "Run D": 34 % of a 200-writer table's CPU after the shard manifest's codec).

// EncodeBase is json.Marshal(m), byte for byte.
func EncodeBase(m *Base) ([]byte, error) {
	if len(m.Quarantined) > 0 {
		return json.Marshal(m)
	}
	if b, ok := appendBaseManifest(m); ok {
		return b, nil
	}
	return json.Marshal(m)
}

// appendBaseManifest is EncodeBase's fast path; false when a time does not encode.
//
// REQUIRES: m.Quarantined is empty.
func appendBaseManifest(m *Base) ([]byte, bool) {
	ok := true
	b := make([]byte, 0, 128+len(m.Runs)*320+len(m.Watermarks)*64)
	b = append(b, `{"version":`...)
	b = strconv.AppendUint(b, m.Version, 10)
	b = append(b, `,"runs":`...)
	if m.Runs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range m.Runs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendRunMeta(b, &m.Runs[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"watermarks":`...)
	if m.Watermarks == nil {
		b = append(b, "null"...)
	} else {
		keys := make([]string, 0, len(m.Watermarks))
		for k := range m.Watermarks {
			keys = append(keys, k)
		}
		slices.Sort(keys) // json.Marshal sorts map keys
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = strconv.AppendUint(b, m.Watermarks[k], 10)
		}
		b = append(b, '}')
	}
	b = append(b, `,"created_at":`...)
	b = appendJSONTime(b, m.CreatedAt, &ok)
	if m.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, m.Reason)
	}
	return append(b, '}'), ok
}

func appendRunMeta(b []byte, r *Run) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, r.ID)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, r.Path)
	b = append(b, `,"rows":`...)
	b = strconv.AppendInt(b, r.Rows, 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, r.Bytes, 10)
	b = append(b, `,"min_key":`...)
	b = appendJSONString(b, r.MinKey)
	b = append(b, `,"max_key":`...)
	b = appendJSONString(b, r.MaxKey)
	b = append(b, `,"min_seq":`...)
	b = strconv.AppendInt(b, r.MinSeq, 10)
	b = append(b, `,"max_seq":`...)
	b = strconv.AppendInt(b, r.MaxSeq, 10)
	b = append(b, `,"deletes":`...)
	b = strconv.AppendInt(b, r.Deletes, 10)
	if r.Checksum != "" {
		b = append(b, `,"crc32c":`...)
		b = appendJSONString(b, r.Checksum)
	}
	if r.Source != "" {
		b = append(b, `,"source":`...)
		b = appendJSONString(b, r.Source)
	}
	return append(b, '}')
}

// UnmarshalBase is json.Unmarshal(raw, m) (m zero on entry): the fast path for the
// shape EncodeBase writes, encoding/json for anything else.
func UnmarshalBase(raw []byte, m *Base) error {
	p := manifestParser{b: raw}
	if p.base(m) {
		return nil
	}
	*m = Base{}
	return json.Unmarshal(raw, m)
}

func (p *manifestParser) base(m *Base) bool {
	return p.document(func(key []byte) bool {
		switch string(key) {
		case "version":
			return p.uint(&m.Version)
		case "runs":
			return p.runs(&m.Runs)
		case "watermarks":
			return p.watermarks(&m.Watermarks)
		case "created_at":
			return p.time(&m.CreatedAt)
		case "reason":
			return p.string(&m.Reason)
		}
		return false // quarantined, or a field this release does not know
	})
}

// runs reads the run list; a repeated "runs" replaces it, as with encoding/json.
func (p *manifestParser) runs(dst *[]Run) bool {
	return parseObjects(p, dst, 16, p.run)
}

// watermarks reads the shard → watermark object. Like encoding/json it adds to a map an
// earlier "watermarks" key made instead of replacing it.
func (p *manifestParser) watermarks(dst *map[string]uint64) bool {
	if !p.peek('{') {
		return false
	}
	if *dst == nil {
		*dst = map[string]uint64{}
	}
	m := *dst
	return p.object(func(key []byte) bool {
		var v uint64
		if !p.uint(&v) {
			return false
		}
		m[string(key)] = v
		return true
	})
}

func (p *manifestParser) run(r *Run) bool {
	return p.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return p.string(&r.ID)
		case "path":
			return p.string(&r.Path)
		case "rows":
			return p.int(&r.Rows)
		case "bytes":
			return p.int(&r.Bytes)
		case "min_key":
			return p.string(&r.MinKey)
		case "max_key":
			return p.string(&r.MaxKey)
		case "min_seq":
			return p.int(&r.MinSeq)
		case "max_seq":
			return p.int(&r.MaxSeq)
		case "deletes":
			return p.int(&r.Deletes)
		case "crc32c":
			return p.string(&r.Checksum)
		case "source":
			return p.string(&r.Source)
		}
		return false
	})
}
