package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// Schema is the generic schema every reliability store uses: a string key and one int64
// value that the oracle tracks (per-key increasing), plus padding so rows have some weight.
var Schema = store.Schema{Fields: []store.Field{
	{Name: "id", Type: store.TypeString},
	{Name: "v", Type: store.TypeInt64},
	{Name: "pad", Type: store.TypeString, Nullable: true},
}}

// Row builds one row of Schema.
func Row(key string, v int64) store.Row {
	return store.Row{Key: key, Values: []any{key, v, strings.Repeat("p", int(v%7)*8)}}
}

// ValueOf extracts "v" from a row returned by Get or List.
func ValueOf(row map[string]any) (int64, error) {
	switch x := row["v"].(type) {
	case int64:
		return x, nil
	case float64:
		return int64(x), nil
	case json.Number:
		return x.Int64()
	}
	return 0, fmt.Errorf("row %v: v is %T", row["id"], row["v"])
}

// ReadAll pages through every row of source ("all", "base", "wal") and returns key -> v.
// Keys seen twice, or out of order across pages, are reported in dups.
func ReadAll(ctx context.Context, s *store.Store, source string, limit int) (rows map[string]int64, dups []string, err error) {
	rows = map[string]int64{}
	after, last := "", ""
	for {
		page, err := s.List(ctx, store.ListOptions{Source: source, Limit: limit, After: after})
		if err != nil {
			return nil, nil, err
		}
		for _, r := range page.Rows {
			id, _ := r["id"].(string)
			v, err := ValueOf(r)
			if err != nil {
				return nil, nil, err
			}
			if _, seen := rows[id]; seen || (last != "" && id <= last) {
				dups = append(dups, id)
			}
			last = id
			rows[id] = v
		}
		if page.Next == "" {
			return rows, dups, nil
		}
		after = page.Next
	}
}

// Layout is what an outside reader (docs/FORMAT.md §2) finds under one store.
type Layout struct {
	BaseVersion uint64
	Watermarks  map[string]uint64
	Runs        []string // paths referenced by the latest base manifest
	RunMeta     []RunInfo
	DataFiles   []string // every object under data/
	Orphans     []string // data/ objects the latest base does not reference
	Shards      map[string]*ShardLayout
}

// ShardLayout is one shard's part of a Layout.
type ShardLayout struct {
	WriterEpoch  uint64
	ReplayAfter  uint64
	Listed       []string // gen paths the latest manifest lists
	ListedMeta   []GenInfo
	ListedGens   []uint64
	GenFiles     []string // gen objects on storage
	UnlistedGens []string // gen objects the latest manifest does not list
	WAL          []string // wal objects
	StaleWAL     []string // wal objects at or below replay_after (garbage)
	Attempts     []string // attempt claims
}

// RunInfo is one base run as the latest base manifest describes it.
type RunInfo struct {
	Path   string `json:"path"`
	MinKey string `json:"min_key"`
	MaxKey string `json:"max_key"`
}

// GenInfo is one listed generation as the latest shard manifest describes it.
type GenInfo struct {
	Gen    uint64 `json:"gen"`
	Path   string `json:"path"`
	MinKey string `json:"min_key"`
	MaxKey string `json:"max_key"`
}

type baseJSON struct {
	Version    uint64            `json:"version"`
	Runs       []RunInfo         `json:"runs"`
	Watermarks map[string]uint64 `json:"watermarks"`
}

type shardJSON struct {
	WriterEpoch uint64    `json:"writer_epoch"`
	Flushed     []GenInfo `json:"flushed"`
	ReplayAfter uint64    `json:"replay_after"`
}

// latestVersion reads the highest <v>.json under prefix.
func latestVersion(ctx context.Context, b *objstore.Bucket, prefix string) (uint64, []byte, error) {
	objs, err := b.List(ctx, prefix)
	if err != nil {
		return 0, nil, err
	}
	var best uint64
	for _, o := range objs {
		name := strings.TrimSuffix(path.Base(o.Key), ".json")
		if v, err := strconv.ParseUint(name, 10, 64); err == nil && v > best {
			best = v
		}
	}
	if best == 0 {
		return 0, nil, nil
	}
	raw, err := b.Get(ctx, fmt.Sprintf("%s%020d.json", prefix, best))
	return best, raw, err
}

// keys are the keys of a List answer.
func keys(objs []objstore.ObjectInfo, err error) ([]string, error) {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out, err
}

// unreferenced are the keys of all that ref does not name.
func unreferenced(all, ref []string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(k string) bool { return slices.Contains(ref, k) })
}

// InspectLayout reads the store's objects the way docs/FORMAT.md describes them.
func InspectLayout(ctx context.Context, b *objstore.Bucket, t store.Target) (*Layout, error) {
	root := t.Path()
	l := &Layout{Watermarks: map[string]uint64{}, Shards: map[string]*ShardLayout{}}
	v, raw, err := latestVersion(ctx, b, root+"/_versions/")
	if err != nil {
		return nil, err
	}
	if v > 0 {
		var m baseJSON
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("base manifest %d: %w", v, err)
		}
		l.BaseVersion = m.Version
		if m.Watermarks != nil {
			l.Watermarks = m.Watermarks
		}
		l.RunMeta = m.Runs
		for _, r := range m.Runs {
			l.Runs = append(l.Runs, r.Path)
		}
	}
	if l.DataFiles, err = keys(b.List(ctx, root+"/data/")); err != nil {
		return nil, err
	}
	l.Orphans = unreferenced(l.DataFiles, l.Runs)
	shards, err := b.ListDirs(ctx, root+"/_mem_wal/")
	if err != nil {
		return nil, err
	}
	for _, sh := range shards {
		pre := root + "/_mem_wal/" + sh + "/"
		sl := &ShardLayout{}
		l.Shards[sh] = sl
		mv, raw, err := latestVersion(ctx, b, pre+"manifest/")
		if err != nil {
			return nil, err
		}
		if mv > 0 {
			var m shardJSON
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, fmt.Errorf("shard manifest %s/%d: %w", sh, mv, err)
			}
			sl.WriterEpoch, sl.ReplayAfter = m.WriterEpoch, m.ReplayAfter
			sl.ListedMeta = m.Flushed
			for _, g := range m.Flushed {
				sl.Listed = append(sl.Listed, g.Path)
				sl.ListedGens = append(sl.ListedGens, g.Gen)
			}
		}
		if sl.GenFiles, err = keys(b.List(ctx, pre+"gen/")); err != nil {
			return nil, err
		}
		sl.UnlistedGens = unreferenced(sl.GenFiles, sl.Listed)
		if sl.WAL, err = keys(b.List(ctx, pre+"wal/")); err != nil {
			return nil, err
		}
		for _, w := range sl.WAL {
			pos, err := strconv.ParseUint(strings.TrimSuffix(path.Base(w), ".arrow"), 10, 64)
			if err == nil && pos <= sl.ReplayAfter {
				sl.StaleWAL = append(sl.StaleWAL, w)
			}
		}
		if sl.Attempts, err = keys(b.List(ctx, pre+"attempts/")); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// Pending is the number of generations above the watermark that shard manifests list.
func (l *Layout) Pending() int {
	n := 0
	for sh, sl := range l.Shards {
		for _, g := range sl.ListedGens {
			if g > l.Watermarks[sh] {
				n++
			}
		}
	}
	return n
}

// Summary renders the leftovers of a layout in one line.
func (l *Layout) Summary() string {
	var unlisted, wal, stale, att int
	for _, sl := range l.Shards {
		unlisted += len(sl.UnlistedGens)
		wal += len(sl.WAL)
		stale += len(sl.StaleWAL)
		att += len(sl.Attempts)
	}
	return fmt.Sprintf("base v%d runs=%d data=%d orphan-data=%d shards=%d pending=%d unlisted-gens=%d wal=%d stale-wal=%d attempt-claims=%d",
		l.BaseVersion, len(l.Runs), len(l.DataFiles), len(l.Orphans), len(l.Shards), l.Pending(), unlisted, wal, stale, att)
}
