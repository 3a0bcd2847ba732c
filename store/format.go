package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FormatVersion is written into every store.json. Readers refuse a newer major format.
const FormatVersion = 1

// Object layout (docs/FORMAT.md is the reference for outside readers):
//
//	_registry/<kind>/<name>.json                      registry entry (existence)
//	<kind>/<name>/store.json                          storeMeta
//	<kind>/<name>/_versions/<v %020d>.json            baseManifest, put-if-absent chain
//	<kind>/<name>/data/<id>.parquet                   base runs (sorted by key, one row per key)
//	<kind>/<name>/_mem_wal/<shard>/manifest/<v>.json  shardManifest, put-if-absent chain
//	<kind>/<name>/_mem_wal/<shard>/wal/<pos>.arrow    WAL objects (Arrow IPC file)
//	<kind>/<name>/_mem_wal/<shard>/gen/<g>-<epoch>.arrow  flushed generations (Arrow IPC file)
//	<kind>/<name>/_mem_wal/<shard>/attempts/<h>.json  commit/abort claims of merge attempts
const (
	registryDir = "_registry"
	versionsDir = "_versions"
	dataDir     = "data"
	memWALDir   = "_mem_wal"
)

func registryKey(t Target) string { return path.Join(registryDir, string(t.Kind), t.Name+".json") }
func storePrefix(t Target) string { return path.Join(string(t.Kind), t.Name) }
func storeMetaKey(t Target) string {
	return path.Join(storePrefix(t), "store.json")
}
func versionsPrefix(t Target) string { return path.Join(storePrefix(t), versionsDir) + "/" }
func memWALPrefix(t Target) string   { return path.Join(storePrefix(t), memWALDir) + "/" }
func shardPrefix(t Target, shard string) string {
	return path.Join(storePrefix(t), memWALDir, shard) + "/"
}
func shardManifestPrefix(t Target, shard string) string { return shardPrefix(t, shard) + "manifest/" }
func walKey(t Target, shard string, pos uint64) string {
	return fmt.Sprintf("%swal/%020d.arrow", shardPrefix(t, shard), pos)
}
func walPrefix(t Target, shard string) string { return shardPrefix(t, shard) + "wal/" }
func genKey(t Target, shard string, gen, epoch uint64) string {
	return fmt.Sprintf("%sgen/%020d-%d.arrow", shardPrefix(t, shard), gen, epoch)
}
func genPrefix(t Target, shard string) string { return shardPrefix(t, shard) + "gen/" }
func attemptKey(t Target, shard, hash string) string {
	return shardPrefix(t, shard) + "attempts/" + hash + ".json"
}
func dataKey(t Target, id string) string { return path.Join(storePrefix(t), dataDir, id+".parquet") }

// versionName formats a version number so that lexical order equals numeric order.
func versionName(v uint64) string { return fmt.Sprintf("%020d.json", v) }

func parseVersionName(name string) (uint64, bool) {
	base := path.Base(name)
	if !strings.HasSuffix(base, ".json") {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSuffix(base, ".json"), 10, 64)
	return v, err == nil
}

func parseWALPos(key string) (uint64, bool) {
	base := path.Base(key)
	if !strings.HasSuffix(base, ".arrow") {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSuffix(base, ".arrow"), 10, 64)
	return v, err == nil
}

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

// chain is a put-if-absent chain of versioned JSON objects under prefix (<v %020d>.json).
// Version n+1 exists only if version n existed when it was published, and garbage
// collection deletes versions in ascending order, so the live versions are always one
// contiguous range [low, latest]. latest() probes forward from a cached hint instead of
// listing, which keeps the per-read cost at one failed GET when nothing changed.
type chain struct {
	b      *Bucket
	prefix string

	mu      sync.Mutex
	hint    uint64
	hintRaw []byte
}

func newChain(b *Bucket, prefix string) *chain { return &chain{b: b, prefix: prefix} }

// latest returns the newest version number and its bytes; (0, nil, nil) when the chain is empty.
func (c *chain) latest(ctx context.Context) (uint64, []byte, error) {
	c.mu.Lock()
	v, raw := c.hint, c.hintRaw
	c.mu.Unlock()
	if v == 0 {
		lv, lraw, err := c.listLatest(ctx)
		if err != nil {
			return 0, nil, err
		}
		v, raw = lv, lraw
	}
	for steps := 0; ; steps++ {
		if steps == 8 {
			// Far behind: one List finds the latest instead of one Get per version.
			lv, lraw, err := c.listLatest(ctx)
			if err != nil {
				return 0, nil, err
			}
			if lv > v {
				v, raw = lv, lraw
			}
		}
		next, err := c.b.Get(ctx, c.prefix+versionName(v+1))
		if err == nil {
			v, raw = v+1, next
			// Remember progress, so a failure later in the walk does not start it over.
			c.mu.Lock()
			if v > c.hint {
				c.hint, c.hintRaw = v, raw
			}
			c.mu.Unlock()
			continue
		}
		if !errors.Is(err, ErrNotFound) {
			return 0, nil, err
		}
		if v > 0 {
			// v+1 is absent. If v itself is gone, collection passed our hint: relist.
			ok, err := c.b.Exists(ctx, c.prefix+versionName(v))
			if err != nil {
				return 0, nil, err
			}
			if !ok {
				lv, lraw, err := c.listLatest(ctx)
				if err != nil {
					return 0, nil, err
				}
				if lv == v {
					return 0, nil, corruptf("version chain %s: version %d vanished", c.prefix, v)
				}
				v, raw = lv, lraw
				continue
			}
		}
		break
	}
	if v > 0 && raw == nil {
		got, err := c.b.Get(ctx, c.prefix+versionName(v))
		if err != nil {
			return 0, nil, err
		}
		raw = got
	}
	c.mu.Lock()
	if v >= c.hint {
		c.hint, c.hintRaw = v, raw
	}
	c.mu.Unlock()
	return v, raw, nil
}

func (c *chain) listLatest(ctx context.Context) (uint64, []byte, error) {
	objs, err := c.b.List(ctx, c.prefix)
	if err != nil {
		return 0, nil, err
	}
	var best uint64
	for _, o := range objs {
		if v, ok := parseVersionName(o.Key); ok && v > best {
			best = v
		}
	}
	if best == 0 {
		return 0, nil, nil
	}
	raw, err := c.b.Get(ctx, c.prefix+versionName(best))
	if errors.Is(err, ErrNotFound) {
		// Collected between list and get: a newer version exists; the caller probes on.
		return best, nil, nil
	}
	return best, raw, err
}

// publish writes version v. ErrAlreadyExists means another writer published v first.
func (c *chain) publish(ctx context.Context, v uint64, raw []byte) error {
	if err := c.b.PutIfAbsent(ctx, c.prefix+versionName(v), raw); err != nil {
		return err
	}
	c.mu.Lock()
	if v > c.hint {
		c.hint, c.hintRaw = v, raw
	}
	c.mu.Unlock()
	return nil
}

// collect deletes versions older than keep behind latest, oldest first (best effort).
func (c *chain) collect(ctx context.Context, latest uint64, keep uint64) {
	if latest <= keep {
		return
	}
	objs, err := c.b.List(ctx, c.prefix)
	if err != nil {
		return
	}
	for _, o := range objs { // List is sorted, so deletion is ascending.
		v, ok := parseVersionName(o.Key)
		if !ok || v+keep >= latest {
			continue
		}
		if err := c.b.Delete(ctx, o.Key); err != nil {
			return
		}
	}
}
