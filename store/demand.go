package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// The demand index (docs/FORMAT.md "Demand records", docs/DESIGN.md §12): one small object
// per sealed generation outside every store's prefix, and one marker per store whose base
// has many runs, so that the maintenance sweep finds the stores in debt with a listing alone
// (everything it decides on is in the key). ':' cannot appear in a shard id, so the marker
// "<kind>/<name>/:compact" never collides with a shard's directory.
const (
	demandDir        = "_demand"
	demandCompactKey = ":compact"
)

// DemandOrphanAge is how old a demand record for a generation the shard manifest never
// published must be before clean-up deletes it: far longer than the two puts of a seal.
const DemandOrphanAge = 10 * time.Minute

func demandKindPrefix(k Kind) string      { return path.Join(demandDir, string(k)) + "/" }
func demandStorePrefix(t Target) string   { return path.Join(demandDir, string(t.Kind), t.Name) + "/" }
func demandCompactMarker(t Target) string { return demandStorePrefix(t) + demandCompactKey }
func demandShardPrefix(t Target, shard string) string {
	return demandStorePrefix(t) + shard + "/"
}
func demandKey(t Target, shard string, gen uint64, sealedAt time.Time, bytes int64) string {
	return fmt.Sprintf("%s%020d-%d-%d", demandShardPrefix(t, shard), gen, sealedAt.Unix(), max(bytes, 0))
}

// DemandRecord is one parsed key of the demand index.
type DemandRecord struct {
	Key    string
	Target Target
	// Shard is empty for the compaction marker (Compact true).
	Shard    string
	Gen      uint64
	SealedAt time.Time
	Bytes    int64
	// Compact marks the store's "base has many runs" marker instead of a generation.
	Compact bool
}

// demandBody is the record's content, the key's facts for a human; the sweep never reads it.
type demandBody struct {
	Target   string    `json:"target"`
	Shard    string    `json:"shard,omitempty"`
	Gen      uint64    `json:"gen,omitempty"`
	SealedAt time.Time `json:"sealed_at,omitzero"`
	Bytes    int64     `json:"bytes,omitempty"`
	Runs     int       `json:"runs,omitempty"`
}

// ParseDemandKey parses a key of the demand index; ok is false for a foreign one (skipped).
func ParseDemandKey(key string) (DemandRecord, bool) {
	rest, ok := strings.CutPrefix(key, demandDir+"/")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) < 3 {
		return DemandRecord{}, false
	}
	kind, err := ParseKind(parts[0])
	if err != nil || ValidateName(parts[1]) != nil {
		return DemandRecord{}, false
	}
	r := DemandRecord{Key: key, Target: Target{Kind: kind, Name: parts[1]}}
	if len(parts) == 3 {
		if parts[2] != demandCompactKey {
			return DemandRecord{}, false
		}
		r.Compact = true
		return r, true
	}
	if len(parts) != 4 || validateShardID(parts[2]) != nil {
		return DemandRecord{}, false
	}
	r.Shard = parts[2]
	f := strings.Split(parts[3], "-")
	if len(f) != 3 {
		return DemandRecord{}, false
	}
	gen, ok1 := parseCounter(f[0], 20)
	sealed, ok2 := parseCounter(f[1], 0) // parseCounter's range is int64's non-negative half
	size, ok3 := parseCounter(f[2], 0)
	if !ok1 || !ok2 || !ok3 {
		return DemandRecord{}, false
	}
	r.Gen, r.SealedAt, r.Bytes = gen, time.Unix(int64(sealed), 0).UTC(), int64(size)
	return r, true
}

// putDemand writes the demand record of generation g of shard. Idempotent: a re-seal of the
// same generation at the same second writes the same key.
//
// REQUIRES: the generation object is written; the shard manifest that lists it is not yet
// published (docs/FORMAT.md, demand crash table).
func (s *Store) putDemand(ctx context.Context, shard string, g manifest.Gen) error {
	body, _ := json.Marshal(demandBody{Target: s.target.String(), Shard: shard, Gen: g.Gen, SealedAt: g.SealedAt, Bytes: g.Bytes})
	key := demandKey(s.target, shard, g.Gen, g.SealedAt, g.Bytes)
	if err := s.db.bucket.Put(ctx, key, body); err != nil {
		return fmt.Errorf("write demand record %s: %w", key, err)
	}
	return nil
}

// DemandCleanResult counts what one clean-up of a shard's demand records did.
type DemandCleanResult struct {
	// Covered: records of generations at or below the watermark (merged) deleted.
	Covered int `json:"covered"`
	// Orphans: records of generations the manifest will never list deleted.
	Orphans int `json:"orphans"`
	// Missing: generations the manifest lists without a record, written now (repair).
	Missing int `json:"missing"`
}

// cleanDemand makes the shard's demand records, objs (listed under its demandShardPrefix),
// match its manifest sm (nil: none) and its watermark wm: it deletes records of merged and
// never-published generations and, with repair, writes the missing records of pending ones.
// With a wm read before sm (ReconcileDemand), a generation merged in between is pending to
// wm: its record is left for the next clean-up while sm lists it, and counted an orphan once
// sm no longer does.
func (s *Store) cleanDemand(ctx context.Context, shard string, sm *manifest.Shard, wm uint64, repair bool, objs []objstore.ObjectInfo) (DemandCleanResult, error) {
	var res DemandCleanResult
	listed := map[uint64]bool{}
	var next uint64
	if sm != nil {
		next = sm.NextGeneration
		for _, g := range sm.Flushed {
			if g.Gen > wm {
				listed[g.Gen] = true
			}
		}
	}
	now := s.db.opts.Now()
	have := map[uint64]bool{}
	var errs []error
	for _, o := range objs {
		r, ok := ParseDemandKey(o.Key)
		if !ok { // a record under the shard's prefix is of its store and shard
			s.db.foreignObject(foreignDemand, o.Key)
			continue
		}
		var drop, orphan bool
		switch {
		case r.Gen <= wm:
			drop = true
		case listed[r.Gen]:
			have[r.Gen] = true
		case r.Gen < next:
			drop, orphan = true, true // drained without a watermark move (quarantine) or a lost seal retry
		default:
			// At or above next_generation: a seal between its record and its manifest, or
			// one that crashed there. Only an old one is certainly dead. A seal time ahead of
			// now says only that the clock that wrote it ran ahead, so the object's age alone
			// judges it; otherwise such a record would count as pending until that time.
			sealedAge := now.Sub(r.SealedAt)
			drop, orphan = (sealedAge >= DemandOrphanAge || sealedAge < 0) && now.Sub(o.ModTime) >= DemandOrphanAge, true
		}
		if !drop {
			continue
		}
		if err := s.db.bucket.Delete(ctx, o.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		if orphan {
			res.Orphans++
		} else {
			res.Covered++
		}
	}
	if repair && sm != nil {
		for _, g := range sm.Flushed {
			if g.Gen <= wm || have[g.Gen] {
				continue
			}
			if err := s.putDemand(ctx, shard, g); err != nil {
				errs = append(errs, err)
				continue
			}
			res.Missing++
		}
	}
	return res, errors.Join(errs...)
}

// afterMergeDemand is the merge commit's best-effort clean-up of the demand index after the
// drain: it deletes the records of shard's generations through through, mergeDeleteConcurrency
// at a time, and writes the compaction marker once the base holds CompactDemandRuns runs;
// what fails is repaired by the next Repair or reconcile.
func (s *Store) afterMergeDemand(ctx context.Context, shard string, through uint64, runs int) {
	if objs, err := s.db.bucket.List(ctx, demandShardPrefix(s.target, shard)); err == nil {
		var g errgroup.Group
		g.SetLimit(mergeDeleteConcurrency)
		for _, o := range objs {
			r, ok := ParseDemandKey(o.Key)
			if !ok {
				s.db.foreignObject(foreignDemand, o.Key)
				continue
			}
			if r.Gen <= through { // a record under the shard's prefix is of its store and shard
				g.Go(s.db.guard("demand delete", func() error { return s.db.bucket.Delete(ctx, o.Key) }))
			}
		}
		_ = g.Wait()
	}
	if t := s.db.opts.CompactDemandRuns; t > 0 && runs >= t {
		_ = s.putCompactDemand(ctx, runs)
	}
}

// putCompactDemand writes the compaction marker (idempotent).
func (s *Store) putCompactDemand(ctx context.Context, runs int) error {
	body, _ := json.Marshal(demandBody{Target: s.target.String(), Runs: runs})
	return s.db.bucket.Put(ctx, demandCompactMarker(s.target), body)
}

// clearCompactDemand deletes the compaction marker once the base the caller read holds under
// CompactDemandRuns runs (runsLeft), then writes it again if the latest base holds that many: a
// merge that published since the caller read the base may have written it just before the
// delete (one that publishes after this read writes it after). With marking off
// (CompactDemandRuns 0) it deletes the marker whatever the runs: one left from when marking was
// on would otherwise start a CompactBase every sweep round for good.
func (s *Store) clearCompactDemand(ctx context.Context, runsLeft int) error {
	t := s.db.opts.CompactDemandRuns
	if t > 0 && runsLeft >= t {
		return nil
	}
	if err := s.db.bucket.Delete(ctx, demandCompactMarker(s.target)); err != nil {
		return err
	}
	if t <= 0 {
		return nil // marking is off: nothing writes the marker again
	}
	base, err := s.loadBase(ctx)
	if err != nil {
		return err
	}
	if runs := len(base.Runs); runs >= s.db.opts.CompactDemandRuns {
		return s.putCompactDemand(ctx, runs)
	}
	return nil
}

// demandByShard is a listing of one store's demand records sorted by shard.
type demandByShard struct {
	records map[string][]objstore.ObjectInfo
	order   []string // shards in first-seen order
	marker  bool     // the compaction marker is among them
}

// add files records under shard sh, which keeps its first-seen place.
func (d *demandByShard) add(sh string, records ...objstore.ObjectInfo) {
	if _, seen := d.records[sh]; !seen {
		d.order = append(d.order, sh)
	}
	d.records[sh] = append(d.records[sh], records...)
}

// listDemand files a listing of the store's demand prefix into d; other keys are foreign.
func (s *Store) listDemand(ctx context.Context, d *demandByShard) error {
	objs, err := s.db.bucket.List(ctx, demandStorePrefix(s.target))
	if err != nil {
		return err
	}
	for _, o := range objs {
		r, ok := ParseDemandKey(o.Key)
		switch {
		case !ok || r.Target != s.target:
			s.db.foreignObject(foreignDemand, o.Key)
		case r.Compact:
			d.marker = true
		default:
			d.add(r.Shard, o)
		}
	}
	return nil
}

// ReconcileDemand checks one store against the demand index (writes missing records, deletes
// stale ones, sets or clears the compaction marker): the slow background path that catches
// whatever the seal and merge hooks missed.
func (s *Store) ReconcileDemand(ctx context.Context) (DemandCleanResult, error) {
	var total DemandCleanResult
	base, err := s.loadBase(ctx)
	if err != nil {
		return total, err
	}
	shards, err := s.listShards(ctx)
	if err != nil {
		return total, err
	}
	d := demandByShard{records: map[string][]objstore.ObjectInfo{}}
	for _, sh := range shards { // manifests first, then record-only shards
		d.add(sh) // listShards keeps shard ids alone, which validateShardID accepts
	}
	if err := s.listDemand(ctx, &d); err != nil {
		return total, err
	}
	var errs []error
	for _, sh := range d.order {
		sm, err := s.loadShard(ctx, sh) // the loop's own err: the marker step below must not see it
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r, err := s.cleanDemand(ctx, sh, sm, base.Watermarks[sh], true, d.records[sh])
		total.Covered += r.Covered
		total.Orphans += r.Orphans
		total.Missing += r.Missing
		if err != nil {
			errs = append(errs, err)
		}
		// base was read before sm: its watermark is at most the latest, so what it covers is merged.
		if err := s.finishStopped(ctx, sh, sm, base.Watermarks[sh]); err != nil {
			errs = append(errs, err)
		}
	}
	var markErr error
	switch t, runs := s.db.opts.CompactDemandRuns, len(base.Runs); {
	case t > 0 && runs >= t && !d.marker:
		markErr = s.putCompactDemand(ctx, runs)
	case (t <= 0 || runs < t) && d.marker: // with marking off, a marker is a leftover
		markErr = s.clearCompactDemand(ctx, runs)
	}
	if markErr != nil {
		errs = append(errs, markErr)
	}
	return total, errors.Join(errs...)
}

// CleanIdleDemand deletes the store's demand records of merged and never-published
// generations for a merge that found no shard pending, which runs no Repair, so that the
// sweep does not start another merge for them every round until the reconcile. A shard
// without a manifest is left to the reconcile.
func (s *Store) CleanIdleDemand(ctx context.Context) (DemandCleanResult, error) {
	var total DemandCleanResult
	d := demandByShard{records: map[string][]objstore.ObjectInfo{}}
	if err := s.listDemand(ctx, &d); err != nil || len(d.order) == 0 {
		return total, err
	}
	sms := make([]*manifest.Shard, len(d.order))
	var err error
	for i, sh := range d.order {
		if sms[i], err = s.loadShard(ctx, sh); err != nil {
			return total, err
		}
	}
	base, err := s.loadBase(ctx) // after the shard manifests, as cleanDemand requires
	if err != nil {
		return total, err
	}
	var errs []error
	for i, sh := range d.order {
		if sms[i] == nil {
			continue
		}
		r, err := s.cleanDemand(ctx, sh, sms[i], base.Watermarks[sh], false, d.records[sh])
		total.Covered += r.Covered
		total.Orphans += r.Orphans
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

// CleanMissingStoreDemand deletes the demand records of t, older than DemandOrphanAge, when t
// does not exist (no registry entry, or no store.json), which the sweep would otherwise start a
// failing run for every round and the reconcile, paging through the registry, never reaches.
// It returns how many it deleted.
func (db *DB) CleanMissingStoreDemand(ctx context.Context, t Target) (int, error) {
	if err := t.Validate(); err != nil {
		return 0, err
	}
	// The registry entry is the store's existence (Open asks for it first): a store.json left
	// without one is a store no Open, merge or reconcile reaches.
	err := db.registered(ctx, t)
	if err == nil {
		_, err = db.readMeta(ctx, t)
	}
	if !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	objs, err := db.bucket.List(ctx, demandStorePrefix(t))
	if err != nil {
		return 0, err
	}
	now := db.opts.Now()
	n := 0
	var errs []error
	for _, o := range objs {
		if r, ok := ParseDemandKey(o.Key); !ok || r.Target != t {
			db.foreignObject(foreignDemand, o.Key)
			continue
		}
		if now.Sub(o.ModTime) < DemandOrphanAge {
			continue
		}
		if err := db.bucket.Delete(ctx, o.Key); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// ReconcileStore runs ReconcileDemand on t without making it resident (a reconcile walks the
// whole registry); a resident handle is used when there is one.
func (db *DB) ReconcileStore(ctx context.Context, t Target) (DemandCleanResult, error) {
	if err := t.Validate(); err != nil {
		return DemandCleanResult{}, err
	}
	db.mu.Lock()
	s := db.stores[t]
	closed := db.closed
	db.mu.Unlock()
	if closed {
		return DemandCleanResult{}, ErrClosed
	}
	if s == nil {
		meta, err := db.readMeta(ctx, t)
		if err != nil {
			return DemandCleanResult{}, err
		}
		s = newStore(db, t, meta, nil) // demand reconcile never encodes rows
	}
	return s.ReconcileDemand(ctx)
}
