package store

import (
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// The manifest model: the JSON objects that describe a store and its state, and the pure
// functions over them (drafting the next version, watermark arithmetic, decoding with the
// checks a reader relies on). No I/O here; manifest_io.go loads and publishes them.
// docs/FORMAT.md documents the same objects for outside readers.

// registryEntry is the existence record of a store.
type registryEntry struct {
	Kind      Kind      `json:"kind"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// storeMeta is the immutable description of a store, written once at create.
type storeMeta struct {
	FormatVersion int       `json:"format_version"`
	Kind          Kind      `json:"kind"`
	Name          string    `json:"name"`
	Key           string    `json:"key"`
	Schema        Schema    `json:"schema"`
	SealOnAppend  bool      `json:"seal_on_append"`
	CreatedAt     time.Time `json:"created_at"`
}

// runMeta describes one base run: a Parquet file sorted by key with one row per key.
type runMeta struct {
	ID      string `json:"id"`
	Path    string `json:"path"`
	Rows    int64  `json:"rows"`
	Bytes   int64  `json:"bytes"`
	MinKey  string `json:"min_key"`
	MaxKey  string `json:"max_key"`
	MinSeq  int64  `json:"min_seq"`
	MaxSeq  int64  `json:"max_seq"`
	Deletes int64  `json:"deletes"`
	// Checksum is the CRC-32C of the file (checksum.go); empty in manifests written before it.
	Checksum string `json:"crc32c,omitempty"`
	// Source says what produced the run: "merge:<shard>:<from>-<through>" or "compact".
	Source string `json:"source,omitempty"`
}

// baseManifest is one version of the base table. Version v+1 is published with a
// put-if-absent of _versions/<v+1>.json: the object written last makes the runs live.
type baseManifest struct {
	Version uint64    `json:"version"`
	Runs    []runMeta `json:"runs"`
	// Watermarks maps shard id to the highest generation of that shard folded into Runs.
	// Readers ignore every generation at or below its shard's watermark.
	Watermarks map[string]uint64 `json:"watermarks"`
	CreatedAt  time.Time         `json:"created_at"`
	// Reason is a human hint ("merge", "compact").
	Reason string `json:"reason,omitempty"`
	// Quarantined lists runs an operator set aside (quarantine.go): no longer read or
	// compacted, never deleted.
	Quarantined []quarantinedObject `json:"quarantined,omitempty"`
}

// quarantinedObject is a damaged object an operator took out of service: reads and merges
// skip it, clean-up never deletes it, so it stays where it was for repair or forensics.
type quarantinedObject struct {
	Path   string    `json:"path"`
	Rows   int64     `json:"rows"`
	MinKey string    `json:"min_key"`
	MaxKey string    `json:"max_key"`
	Gen    uint64    `json:"gen,omitempty"` // generations only
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

func (m *baseManifest) clone() *baseManifest {
	c := *m
	c.Runs = append([]runMeta(nil), m.Runs...)
	c.Quarantined = append([]quarantinedObject(nil), m.Quarantined...)
	c.Watermarks = make(map[string]uint64, len(m.Watermarks))
	for k, v := range m.Watermarks {
		c.Watermarks[k] = v
	}
	return &c
}

func (m *baseManifest) rows() int64 {
	var n int64
	for _, r := range m.Runs {
		n += r.Rows
	}
	return n
}

func (m *baseManifest) bytes() int64 {
	var n int64
	for _, r := range m.Runs {
		n += r.Bytes
	}
	return n
}

// genMeta describes one flushed generation of a shard.
type genMeta struct {
	Gen      uint64    `json:"gen"`
	Path     string    `json:"path"`
	Rows     int64     `json:"rows"`
	Bytes    int64     `json:"bytes"`
	MinKey   string    `json:"min_key"`
	MaxKey   string    `json:"max_key"`
	MinSeq   int64     `json:"min_seq"`
	MaxSeq   int64     `json:"max_seq"`
	SealedAt time.Time `json:"sealed_at"`
	// Checksum is the CRC-32C of the file (checksum.go); empty in manifests written before it.
	Checksum string `json:"crc32c,omitempty"`
}

// shardManifest is one version of a shard's state, published on a put-if-absent chain.
type shardManifest struct {
	Shard          string `json:"shard"`
	Version        uint64 `json:"version"`
	WriterEpoch    uint64 `json:"writer_epoch"`
	NextGeneration uint64 `json:"next_generation"`
	// Flushed lists sealed generations not yet drained by a merge, ascending.
	Flushed []genMeta `json:"flushed"`
	// Quarantined lists generations an operator set aside (quarantine.go): no longer read
	// or merged, never deleted.
	Quarantined []quarantinedObject `json:"quarantined,omitempty"`
	// ReplayAfter is the highest WAL position whose rows are all in flushed generations
	// (or drained into the base). A restarted writer replays WAL objects above it.
	ReplayAfter uint64    `json:"replay_after"`
	MaxSeq      int64     `json:"max_seq"`
	UpdatedAt   time.Time `json:"updated_at"`
}

func (m *shardManifest) clone() *shardManifest {
	c := *m
	c.Flushed = append([]genMeta(nil), m.Flushed...)
	c.Quarantined = append([]quarantinedObject(nil), m.Quarantined...)
	return &c
}

// pendingAbove returns the flushed generations above watermark, ascending.
func (m *shardManifest) pendingAbove(watermark uint64) []genMeta {
	var out []genMeta
	for _, g := range m.Flushed {
		if g.Gen > watermark {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Gen < out[j].Gen })
	return out
}

// coveredBy returns the listed generations at or below watermark: already in the base, so
// only a drain (interrupted by a crash after the commit) is left to do for them.
func (m *shardManifest) coveredBy(watermark uint64) []uint64 {
	var out []uint64
	for _, g := range m.Flushed {
		if g.Gen <= watermark {
			out = append(out, g.Gen)
		}
	}
	return out
}

// attemptClaim records whether a merge attempt's staged files were committed or aborted.
// Exactly one of the two can be claimed (put-if-absent), so a late commit can never publish
// files that an abort deleted, and an abort never deletes files a commit may publish.
type attemptClaim struct {
	State      string    `json:"state"` // "commit" or "abort"
	AttemptKey string    `json:"attempt_key"`
	Through    uint64    `json:"through"`
	At         time.Time `json:"at"`
}

func decodeJSONObject(data []byte, v any, what string) error {
	if err := json.Unmarshal(data, v); err != nil {
		return corruptf("%s: %v", what, err)
	}
	return nil
}

// emptyBase is version 0 of every base table: no runs, no watermarks.
func emptyBase() *baseManifest { return &baseManifest{Watermarks: map[string]uint64{}} }

// next is the draft of version v+1: a copy of m with the version bumped and reason set.
// Whoever publishes it first wins; a loser rebuilds its draft from the newer version.
func (m *baseManifest) next(reason string) *baseManifest {
	n := m.clone()
	n.Version = m.Version + 1
	n.Reason = reason
	return n
}

// references reports whether a live run of m is stored at p.
func (m *baseManifest) references(p string) bool {
	for _, r := range m.Runs {
		if r.Path == p {
			return true
		}
	}
	return false
}

// withMerges is the draft of the one version that publishes every merge of ps (CommitRound):
// m's runs plus each merge's staged files, each merge's shard watermark moved to its
// Through. Rows of different merges are ranked by (seq, shard) like any others, so the order
// of ps does not matter to readers.
//
// REQUIRES: the shards of ps are distinct, and for each p watermarkCoverage is rangeOpen
// against m: the runs already in m hold none of p's generations.
func (m *baseManifest) withMerges(ps []*PreparedMerge) *baseManifest {
	n := m.next("merge")
	for _, p := range ps {
		for _, f := range p.Staged {
			n.Runs = append(n.Runs, runMeta{
				ID: strings.TrimSuffix(path.Base(f.Path), ".parquet"), Path: f.Path, Rows: f.Rows, Bytes: f.Bytes,
				MinKey: f.MinKey, MaxKey: f.MaxKey, MinSeq: f.MinSeq, MaxSeq: f.MaxSeq,
				Checksum: f.Checksum,
				Source:   fmt.Sprintf("merge:%s:%d-%d", p.Shard, p.Generations[0], p.Through),
			})
		}
		n.Watermarks[p.Shard] = p.Through
	}
	return n
}

// withCompaction is the draft of the version that replaces inputs by out (nil: every input
// row was dropped). ok is false when an input is no longer in m (another compaction or a
// quarantine took it): the pass must not publish, since its output would resurrect rows.
// Runs that merges appended meanwhile are kept.
func (m *baseManifest) withCompaction(inputs []runMeta, out *runMeta) (_ *baseManifest, ok bool) {
	drop := make(map[string]bool, len(inputs))
	for _, r := range inputs {
		drop[r.ID] = true
	}
	n := m.next("compact")
	n.Runs = n.Runs[:0]
	present := 0
	for _, r := range m.Runs {
		if drop[r.ID] {
			present++
			continue
		}
		n.Runs = append(n.Runs, r)
	}
	if present != len(inputs) {
		return nil, false
	}
	if out != nil {
		n.Runs = append(n.Runs, *out)
	}
	return n, true
}

// rangeCoverage is what a shard's watermark says about a prepared range of its generations.
type rangeCoverage int

const (
	// rangeOpen: the watermark is below the range; only a commit of it can move it on.
	rangeOpen rangeCoverage = iota
	// rangeCommitted: the watermark is at or past the range's end; its rows are in the base
	// (this attempt or another one published them).
	rangeCommitted
	// rangeOverlapped: the watermark is inside the range; another attempt published a part
	// of it, so this one can never publish (ErrStalePreparation).
	rangeOverlapped
)

// watermarkCoverage classifies generations from..through against watermark wm.
//
// INVARIANT: watermarks only grow and a generation at or below its shard's watermark is in
// the base, so a range once committed or overlapped never becomes open again.
func watermarkCoverage(wm, from, through uint64) rangeCoverage {
	switch {
	case wm >= through:
		return rangeCommitted
	case wm >= from:
		return rangeOverlapped
	}
	return rangeOpen
}

// decodeBaseManifest decodes version v of t's base manifest and checks what a reader
// relies on: the version it names and run paths inside the store's data directory.
// Anything else is ErrCorrupt.
func decodeBaseManifest(raw []byte, v uint64, t Target) (*baseManifest, error) {
	var m baseManifest
	if err := unmarshalBaseManifest(raw, &m); err != nil {
		return nil, corruptf("base manifest %d of %s: %v", v, t, err)
	}
	if m.Version != v {
		return nil, corruptf("base manifest %s/%d says version %d", t, v, m.Version)
	}
	if m.Watermarks == nil {
		m.Watermarks = map[string]uint64{}
	}
	prefix := path.Join(storePrefix(t), dataDir) + "/"
	for _, r := range m.Runs {
		if !strings.HasPrefix(r.Path, prefix) || objstore.CheckKey(r.Path) != nil {
			return nil, corruptf("base manifest %s/%d lists run path %q outside %s", t, v, r.Path, prefix)
		}
		if r.Bytes < 0 || r.Rows < 0 {
			return nil, corruptf("base manifest %s/%d: run %q has %d rows, %d bytes", t, v, r.Path, r.Rows, r.Bytes)
		}
	}
	for shard, wm := range m.Watermarks {
		if wm > maxCounter {
			return nil, corruptf("base manifest %s/%d: watermark %d of shard %q is out of range", t, v, wm, clip(shard))
		}
	}
	return &m, nil
}

// decodeShardManifest decodes version v of shard's manifest in t and checks the version
// and shard it names and that its generation paths are the shard's. Anything else is
// ErrCorrupt.
func decodeShardManifest(raw []byte, v uint64, t Target, shard string) (*shardManifest, error) {
	var m shardManifest
	if err := unmarshalShardManifest(raw, &m); err != nil {
		return nil, corruptf("shard manifest %s/%s/%d: %v", t, shard, v, err)
	}
	if m.Version != v || m.Shard != shard {
		return nil, corruptf("shard manifest %s/%s/%d names %s/%d", t, shard, v, m.Shard, m.Version)
	}
	if m.WriterEpoch > maxCounter || m.NextGeneration > maxCounter || m.ReplayAfter > maxCounter {
		return nil, corruptf("shard manifest %s/%s/%d: writer_epoch %d, next_generation %d or replay_after %d is out of range",
			t, shard, v, m.WriterEpoch, m.NextGeneration, m.ReplayAfter)
	}
	gp := genPrefix(t, shard)
	for _, g := range m.Flushed {
		if !strings.HasPrefix(g.Path, gp) || objstore.CheckKey(g.Path) != nil {
			return nil, corruptf("shard manifest %s/%s/%d lists generation path %q outside %s", t, shard, v, g.Path, gp)
		}
		if g.Gen > maxCounter || g.Bytes < 0 || g.Rows < 0 {
			return nil, corruptf("shard manifest %s/%s/%d: generation %d (%q) has %d rows, %d bytes", t, shard, v, g.Gen, g.Path, g.Rows, g.Bytes)
		}
	}
	for _, q := range m.Quarantined {
		if q.Gen > maxCounter {
			return nil, corruptf("shard manifest %s/%s/%d: quarantined generation %d is out of range", t, shard, v, q.Gen)
		}
	}
	return &m, nil
}
