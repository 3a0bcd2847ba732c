package store

import (
	"sync"
	"time"

	"go.uber.org/zap"
)

// Foreign objects: keys under walkeeper's prefixes that it did not write (format_keys.go). A
// listing skips them; each is counted in walkeeper_foreign_objects_total{place} and logged at
// most once a minute per place, so a directory full of them cannot flood the log.

// The places a listing finds foreign keys in (the metric's label).
const (
	foreignRegistry    = "registry"    // _registry/<kind>/
	foreignWAL         = "wal"         // _mem_wal/<shard>/wal/
	foreignGenerations = "generations" // _mem_wal/<shard>/gen/
	foreignManifests   = "manifests"   // _versions/ and _mem_wal/<shard>/manifest/
	foreignShards      = "shards"      // directories under _mem_wal/
	foreignDemand      = "demand"      // _demand/<kind>/
	foreignStaging     = "staging"     // a merge attempt's staged runs under data/
	foreignCompaction  = "compaction"  // compaction outputs under data/
	foreignClaims      = "claims"      // _mem_wal/<shard>/attempts/
)

// foreignLogEvery is how often each place may log a foreign key.
const foreignLogEvery = time.Minute

// foreignLog rate-limits the warnings; the counter counts every key.
type foreignLog struct {
	mu      sync.Mutex
	last    map[string]time.Time
	skipped map[string]int // keys not logged since the last warning, per place
}

// foreignObject records that a listing of place skipped key.
func (db *DB) foreignObject(place, key string) {
	db.metrics.ForeignObjects.WithLabelValues(place).Inc()
	f := &db.foreign
	now := db.opts.Now()
	f.mu.Lock()
	if f.last == nil {
		f.last, f.skipped = map[string]time.Time{}, map[string]int{}
	}
	if last, ok := f.last[place]; ok && now.Sub(last) < foreignLogEvery {
		f.skipped[place]++
		f.mu.Unlock()
		return
	}
	f.last[place] = now
	skipped := f.skipped[place]
	f.skipped[place] = 0
	f.mu.Unlock()
	db.log.Warn("skipping an object walkeeper did not write; remove it from the storage root",
		zap.String("place", place), zap.String("key", key), zap.Int("not_logged_since_last", skipped))
}
