package manifest

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/walkeeper/walkeeper/store/rowcodec"
	"github.com/walkeeper/walkeeper/target"
)

// RegistryEntry is the existence record of a store.
type RegistryEntry struct {
	Kind      target.Kind `json:"kind"`
	Name      string      `json:"name"`
	CreatedAt time.Time   `json:"created_at"`
}

// StoreMeta is the immutable description of a store, written once at create.
type StoreMeta struct {
	FormatVersion int             `json:"format_version"`
	Kind          target.Kind     `json:"kind"`
	Name          string          `json:"name"`
	Key           string          `json:"key"`
	Schema        rowcodec.Schema `json:"schema"`
	SealOnAppend  bool            `json:"seal_on_append"`
	CreatedAt     time.Time       `json:"created_at"`
}

// Run describes one base run: a Parquet file sorted by key with one row per key.
type Run struct {
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

// Base is one version of the base table, published with a put-if-absent of
// _versions/<v>.json, the object written last, which makes the runs live.
type Base struct {
	Version uint64 `json:"version"`
	Runs    []Run  `json:"runs"`
	// Watermarks maps shard id to the highest generation of that shard folded into Runs.
	// Readers ignore every generation at or below its shard's watermark.
	Watermarks map[string]uint64 `json:"watermarks"`
	CreatedAt  time.Time         `json:"created_at"`
	// Reason is a human hint ("merge", "compact").
	Reason string `json:"reason,omitempty"`
	// Quarantined lists runs an operator set aside (quarantine.go): no longer read or
	// compacted, never deleted.
	Quarantined []QuarantinedObject `json:"quarantined,omitempty"`
}

// QuarantinedObject is a damaged object an operator took out of service: reads and merges
// skip it, clean-up never deletes it, so it stays where it was for repair or forensics.
type QuarantinedObject struct {
	Path   string    `json:"path"`
	Rows   int64     `json:"rows"`
	MinKey string    `json:"min_key"`
	MaxKey string    `json:"max_key"`
	Gen    uint64    `json:"gen,omitempty"` // generations only
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Gen describes one flushed generation of a shard.
type Gen struct {
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

// Shard is one version of a shard's state, published on a put-if-absent chain.
type Shard struct {
	Shard          string `json:"shard"`
	Version        uint64 `json:"version"`
	WriterEpoch    uint64 `json:"writer_epoch"`
	NextGeneration uint64 `json:"next_generation"`
	// Flushed lists sealed generations not yet drained by a merge, ascending.
	Flushed []Gen `json:"flushed"`
	// Quarantined lists generations an operator set aside (quarantine.go): no longer read
	// or merged, never deleted.
	Quarantined []QuarantinedObject `json:"quarantined,omitempty"`
	// ReplayAfter is the highest WAL position whose rows are all in flushed generations
	// (or drained into the base). A restarted writer replays WAL objects above it.
	ReplayAfter uint64    `json:"replay_after"`
	MaxSeq      int64     `json:"max_seq"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// Next is the draft of version v+1: a copy of m with the version bumped. Whoever publishes
// it first wins; a loser drafts again from the newer version.
func (m *Shard) Next() *Shard {
	n := *m
	n.Version++
	n.Flushed = append([]Gen(nil), m.Flushed...)
	n.Quarantined = append([]QuarantinedObject(nil), m.Quarantined...)
	return &n
}

// PendingAbove returns the flushed generations above watermark, ascending.
func (m *Shard) PendingAbove(watermark uint64) []Gen {
	var out []Gen
	for _, g := range m.Flushed {
		if g.Gen > watermark {
			out = append(out, g)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Gen < out[j].Gen })
	return out
}

// CoveredBy returns the listed generations at or below watermark: already in the base, so
// only a drain (interrupted by a crash after the commit) is left to do for them.
func (m *Shard) CoveredBy(watermark uint64) []uint64 {
	var out []uint64
	for _, g := range m.Flushed {
		if g.Gen <= watermark {
			out = append(out, g.Gen)
		}
	}
	return out
}

// AttemptClaim records whether a merge attempt's staged files were committed or aborted.
// Exactly one of the two can be claimed (put-if-absent), so a late commit can never publish
// files that an abort deleted, and an abort never deletes files a commit may publish.
type AttemptClaim struct {
	State      string    `json:"state"` // "commit" or "abort"
	AttemptKey string    `json:"attempt_key"`
	Through    uint64    `json:"through"`
	At         time.Time `json:"at"`
}

// EmptyBase is version 0 of every base table: no runs, no watermarks.
func EmptyBase() *Base { return &Base{Watermarks: map[string]uint64{}} }

// Next is the draft of version v+1: a copy of m with the version bumped and reason set.
// Whoever publishes it first wins; a loser rebuilds its draft from the newer version.
func (m *Base) Next(reason string) *Base {
	n := *m
	n.Version, n.Reason = m.Version+1, reason
	n.Runs = append([]Run(nil), m.Runs...)
	n.Quarantined = append([]QuarantinedObject(nil), m.Quarantined...)
	n.Watermarks = make(map[string]uint64, len(m.Watermarks))
	maps.Copy(n.Watermarks, m.Watermarks)
	return &n
}

// References reports whether a live run of m is stored at p.
func (m *Base) References(p string) bool {
	return slices.ContainsFunc(m.Runs, func(r Run) bool { return r.Path == p })
}

// WithCompaction is the draft of the version that replaces inputs by out (nil: every row was
// dropped), keeping runs merges appended; ok is false when an input is no longer in m, since
// publishing would resurrect rows.
func (m *Base) WithCompaction(inputs []Run, out *Run) (_ *Base, ok bool) {
	drop := make(map[string]bool, len(inputs))
	for _, r := range inputs {
		drop[r.ID] = true
	}
	n := m.Next("compact")
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

// Coverage is what a shard's watermark says about a prepared range of its generations.
type Coverage int

const (
	// RangeOpen: the watermark is below the range; only a commit of it can move it on.
	RangeOpen Coverage = iota
	// RangeCommitted: the watermark is at or past the range's end; its rows are in the base
	// (this attempt or another one published them).
	RangeCommitted
	// RangeOverlapped: the watermark is inside the range; another attempt published a part
	// of it, so this one can never publish (ErrStalePreparation).
	RangeOverlapped
)

// WatermarkCoverage classifies generations from..through against watermark wm.
//
// INVARIANT: watermarks only grow and a generation at or below its shard's watermark is in
// the base, so a range once committed or overlapped never becomes open again.
func WatermarkCoverage(wm, from, through uint64) Coverage {
	switch {
	case wm >= through:
		return RangeCommitted
	case wm >= from:
		return RangeOverlapped
	}
	return RangeOpen
}
