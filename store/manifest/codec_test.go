package manifest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// sameAsEncodingJSON decodes raw with the codec's unmarshal and with encoding/json and fails
// unless both refuse it or both give the same manifest.
func sameAsEncodingJSON[M any](t *testing.T, unmarshal func([]byte, *M) error, raw []byte) {
	t.Helper()
	var fast, slow M
	errFast := unmarshal(raw, &fast)
	errSlow := json.Unmarshal(raw, &slow)
	if (errFast == nil) != (errSlow == nil) {
		t.Fatalf("codec error %v, encoding/json error %v, for %q", errFast, errSlow, raw)
	}
	if errSlow == nil && !reflect.DeepEqual(fast, slow) {
		t.Fatalf("codec decoded %+v, encoding/json %+v, from %q", fast, slow, raw)
	}
}

// roundTripsLikeEncodingJSON encodes 2000 random manifests: each to exactly json.Marshal's
// bytes, which decode as encoding/json decodes them.
func roundTripsLikeEncodingJSON[M any](t *testing.T, r *rand.Rand, random func(*rand.Rand) *M, encode func(*M) ([]byte, error), unmarshal func([]byte, *M) error) {
	t.Helper()
	for range 2000 {
		m := random(r)
		got, err := encode(m)
		require.NoError(t, err)
		want, err := json.Marshal(m)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
		sameAsEncodingJSON(t, unmarshal, got)
	}
}

// fuzzLikeEncodingJSON seeds f with 16 random manifests encoded and holds the codec's
// decoder to encoding/json on any input.
func fuzzLikeEncodingJSON[M any](f *testing.F, r *rand.Rand, random func(*rand.Rand) *M, encode func(*M) ([]byte, error), unmarshal func([]byte, *M) error) {
	for range 16 {
		raw, _ := encode(random(r))
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		sameAsEncodingJSON(t, unmarshal, raw)
	})
}

func randomShardManifest(r *rand.Rand) *Shard {
	strs := []string{"", "a", "generic/hot/memwal/s1/gen/00000000000000000001-1.ipc", "k<&>", `q"uote\`, "tab\there", "ünï", "\u2028", string([]byte{0xff, 'x'}), "0123456789abcdef"}
	times := []time.Time{{}, time.Date(2026, 12, 1, 16, 0, 0, 123456789, time.UTC), time.Date(1999, 1, 2, 3, 4, 5, 0, time.FixedZone("x", -7*3600-30*60)), time.Unix(0, 0).UTC(), time.Date(2026, 1, 1, 0, 0, 0, 100, time.UTC)}
	ints := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, 1796122116141868182}
	uints := []uint64{0, 1, 42, math.MaxUint64, 1 << 53}
	pick := func(n int) int { return r.IntN(n) }
	m := &Shard{
		Shard: strs[pick(len(strs))], Version: uints[pick(len(uints))], WriterEpoch: uints[pick(len(uints))],
		NextGeneration: uints[pick(len(uints))], ReplayAfter: uints[pick(len(uints))], MaxSeq: ints[pick(len(ints))],
		UpdatedAt: times[pick(len(times))],
	}
	switch pick(3) {
	case 0: // nil
	case 1:
		m.Flushed = []Gen{}
	default:
		for range pick(20) + 1 {
			m.Flushed = append(m.Flushed, Gen{
				Gen: uints[pick(len(uints))], Path: strs[pick(len(strs))], Rows: ints[pick(len(ints))], Bytes: ints[pick(len(ints))],
				MinKey: strs[pick(len(strs))], MaxKey: strs[pick(len(strs))], MinSeq: ints[pick(len(ints))], MaxSeq: ints[pick(len(ints))],
				SealedAt: times[pick(len(times))], Checksum: strs[pick(len(strs))],
			})
		}
	}
	if pick(8) == 0 {
		m.Quarantined = []QuarantinedObject{{Path: "p", Reason: "r", Gen: 3}}
	}
	return m
}

// The codec writes exactly json.Marshal's bytes and reads them back as encoding/json
// does, and it takes its fast path (no encoding/json) for everything walkeeper writes.
func TestShardManifestCodec(t *testing.T) {
	roundTripsLikeEncodingJSON(t, rand.New(rand.NewPCG(1, 2)), randomShardManifest, EncodeShard, UnmarshalShard)

	// What a walkeeper seal writes decodes on the fast path.
	m := &Shard{Shard: "2f90d4b5-0361-5700-a264-7f3fb3ca947e", Version: 9, WriterEpoch: 2, NextGeneration: 4,
		ReplayAfter: 7, MaxSeq: 1796122116141869155, UpdatedAt: time.Now().UTC()}
	for g := uint64(1); g < 4; g++ {
		m.Flushed = append(m.Flushed, Gen{Gen: g, Path: fmt.Sprintf("generic/hot/memwal/s/gen/%020d-2.ipc", g), Rows: 3, Bytes: 900,
			MinKey: "a0000", MaxKey: "a0004", MinSeq: 1796122116141868182, MaxSeq: 1796122116141869155, SealedAt: time.Now().UTC(), Checksum: "f040933d"})
	}
	raw, err := EncodeShard(m)
	require.NoError(t, err)
	var fast Shard
	require.True(t, parseDocument(raw, shardFields(&fast, nil)), "the fast path reads what walkeeper writes")
	require.Equal(t, m.Flushed[2].SealedAt, fast.Flushed[2].SealedAt)
	require.Equal(t, m.Flushed[2].Path, fast.Flushed[2].Path)

	// A year past 9999 is refused as json.Marshal refuses it.
	_, err = EncodeShard(&Shard{UpdatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)})
	require.Error(t, err)

	// Inputs other writers may produce: each decodes exactly as encoding/json decodes it.
	for _, in := range []string{
		string(raw),
		strings.ReplaceAll(string(raw), ",", ",\n  "),
		`{"shard":"s","version":1,"flushed":null}`,
		`{"shard":"s","version":1,"flushed":[]}`,
		`{"Shard":"s","VERSION":2}`,
		`{"shard":"s","shard":"t","version":1,"version":2}`,
		`{"shard":"s","flushed":[{"gen":1}],"flushed":[{"gen":2},{"gen":3}]}`,
		`{"shard":"s\u0041","version":1}`,
		`{"shard":"s","version":1e3}`,
		`{"shard":"s","version":-1}`,
		`{"shard":"s","version":01}`,
		`{"shard":"s","version":1.5}`,
		`{"shard":"s","version":18446744073709551616}`,
		`{"shard":"s","max_seq":-9223372036854775808}`,
		`{"shard":"s","max_seq":9223372036854775808}`,
		`{"shard":"s","max_seq":-0}`,
		`{"shard":"s","updated_at":"2026-12-01T16:00:00Z"}`,
		`{"shard":"s","updated_at":"2026-12-01 16:00:00"}`,
		`{"shard":"s","updated_at":null}`,
		`{"shard":"s","future_field":{"a":[1,2]}}`,
		`{"shard":"s","flushed":[{"gen":1,"future":true}]}`,
		`{"shard":"s","quarantined":[{"path":"p","reason":"r","at":"2026-12-01T16:00:00Z"}]}`,
		`{"shard":"s",}`,
		`{"shard":"s"} x`,
		`{"shard":"s"`,
		`{"shard":"tab	in"}`,
		`[]`,
		``,
		`null`,
		` {"shard" : "s" , "version" : 3 } `,
	} {
		sameAsEncodingJSON(t, UnmarshalShard, []byte(in))
	}
}

// FuzzShardManifestCodec holds the codec's decoder to encoding/json on any input:
//
//	go test -run '^$' -fuzz '^FuzzShardManifestCodec$' -fuzztime 1m ./store/manifest/
func FuzzShardManifestCodec(f *testing.F) {
	f.Add([]byte(`{"shard":"s","flushed":[{"gen":1,"path":"p","sealed_at":"2026-12-01T16:00:00.5Z"}]}`))
	fuzzLikeEncodingJSON(f, rand.New(rand.NewPCG(3, 4)), randomShardManifest, EncodeShard, UnmarshalShard)
}

func randomBaseManifest(r *rand.Rand) *Base {
	shard := randomShardManifest(r) // its strings, numbers and times
	m := &Base{Version: shard.Version, CreatedAt: shard.UpdatedAt}
	if r.IntN(2) == 0 {
		m.Reason = shard.Shard
	}
	switch r.IntN(3) {
	case 0:
	case 1:
		m.Runs = []Run{}
	default:
		for _, g := range shard.Flushed {
			m.Runs = append(m.Runs, Run{ID: g.MinKey, Path: g.Path, Rows: g.Rows, Bytes: g.Bytes, MinKey: g.MinKey, MaxKey: g.MaxKey,
				MinSeq: g.MinSeq, MaxSeq: g.MaxSeq, Deletes: g.Rows, Checksum: g.Checksum, Source: g.MaxKey})
		}
	}
	if r.IntN(4) > 0 {
		m.Watermarks = map[string]uint64{}
		for _, g := range shard.Flushed {
			m.Watermarks[g.Path] = g.Gen
		}
	}
	if len(shard.Quarantined) > 0 {
		m.Quarantined = shard.Quarantined
	}
	return m
}

func TestBaseManifestCodec(t *testing.T) {
	roundTripsLikeEncodingJSON(t, rand.New(rand.NewPCG(5, 6)), randomBaseManifest, EncodeBase, UnmarshalBase)

	m := &Base{Version: 12, CreatedAt: time.Now().UTC(), Reason: "merge",
		Watermarks: map[string]uint64{"2f90d4b5-0361-5700-a264-7f3fb3ca947e": 40, "a": 3}}
	for i := range 3 {
		m.Runs = append(m.Runs, Run{ID: fmt.Sprintf("m-%d", i), Path: fmt.Sprintf("generic/hot/data/m-%d.parquet", i), Rows: 5, Bytes: 1938,
			MinKey: "a0000", MaxKey: "a0004", MinSeq: 1796122116141868182, MaxSeq: 1796122116141869155, Checksum: "f040933d", Source: "merge:a:1-3"})
	}
	raw, err := EncodeBase(m)
	require.NoError(t, err)
	var fast Base
	require.True(t, parseDocument(raw, baseFields(&fast, nil)), "the fast path reads what walkeeper writes")
	require.Equal(t, m.Watermarks, fast.Watermarks)
	require.Equal(t, m.Runs, fast.Runs)

	for _, in := range []string{
		string(raw),
		strings.ReplaceAll(string(raw), ",", ",\n  "),
		`{"version":1,"watermarks":null}`,
		`{"version":1,"watermarks":{}}`,
		`{"version":1,"watermarks":{"a":1},"watermarks":{"b":2}}`,
		`{"version":1,"watermarks":{"a":1,"a":2}}`,
		`{"version":1,"watermarks":{"a":-1}}`,
		`{"version":1,"watermarks":{"a\u0062":1}}`,
		`{"version":1,"watermarks":[]}`,
		`{"version":1,"runs":[{"id":"x"}],"runs":[]}`,
		`{"version":1,"runs":[{"id":"x","future":1}]}`,
		`{"version":1,"runs":null}`,
		`{"version":1,"reason":"compact","quarantined":[]}`,
		`{"version":1,"Version":2}`,
		`{"version":1,"created_at":"2026-12-01T16:00:00.000000001+01:00"}`,
		`{"version":1,} `,
		`{"version":1}{}`,
	} {
		sameAsEncodingJSON(t, UnmarshalBase, []byte(in))
	}
}

// FuzzBaseManifestCodec holds the base codec's decoder to encoding/json on any input.
func FuzzBaseManifestCodec(f *testing.F) {
	fuzzLikeEncodingJSON(f, rand.New(rand.NewPCG(7, 8)), randomBaseManifest, EncodeBase, UnmarshalBase)
}
