package store

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/target"
)

// The engine's side of the manifest model: decoding a version with the checks a reader relies
// on, and the draft that publishes a round of merges.

func decodeJSONObject(data []byte, v any, what string) error {
	if err := json.Unmarshal(data, v); err != nil {
		return corruptf("%s: %v", what, err)
	}
	return nil
}

// decodeBaseManifest decodes version v of t's base manifest and checks the version it names
// and that its run paths are in the store's data directory; anything else is ErrCorrupt.
func decodeBaseManifest(raw []byte, v uint64, t Target) (*manifest.Base, error) {
	var m manifest.Base
	if err := manifest.UnmarshalBase(raw, &m); err != nil {
		return nil, corruptf("base manifest %d of %s: %v", v, t, err)
	}
	if m.Version != v {
		return nil, corruptf("base manifest %s/%d says version %d", t, v, m.Version)
	}
	if m.Watermarks == nil {
		m.Watermarks = map[string]uint64{}
	}
	prefix := dataPrefix(t)
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
			return nil, corruptf("base manifest %s/%d: watermark %d of shard %q is out of range", t, v, wm, target.Clip(shard))
		}
	}
	return &m, nil
}

// decodeShardManifest decodes version v of shard's manifest in t and checks the version and
// shard it names and its generation paths; anything else is ErrCorrupt.
func decodeShardManifest(raw []byte, v uint64, t Target, shard string) (*manifest.Shard, error) {
	var m manifest.Shard
	if err := manifest.UnmarshalShard(raw, &m); err != nil {
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

// withMerges is the draft of the one version that publishes every merge of ps (CommitRound):
// m's runs plus each merge's staged files, each shard's watermark moved to its Through (the
// order of ps does not matter to readers, who rank rows by (seq, shard)).
//
// REQUIRES: the shards of ps are distinct, and for each p manifest.WatermarkCoverage is
// RangeOpen against m: the runs already in m hold none of p's generations.
func withMerges(m *manifest.Base, ps []*PreparedMerge) *manifest.Base {
	n := m.Next("merge")
	for _, p := range ps {
		for _, f := range p.Staged {
			n.Runs = append(n.Runs, manifest.Run{
				ID: strings.TrimSuffix(path.Base(f.Path), ".parquet"), Path: f.Path, Rows: f.Rows, Bytes: f.Bytes,
				MinKey: f.MinKey, MaxKey: f.MaxKey, MinSeq: f.MinSeq, MaxSeq: f.MaxSeq,
				Deletes: f.Deletes, Checksum: f.Checksum,
				Source: fmt.Sprintf("merge:%s:%d-%d", p.Shard, p.Generations[0], p.Through),
			})
		}
		n.Watermarks[p.Shard] = p.Through
	}
	return n
}
