package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// Quarantine is the operator's answer to a damaged object that blocks its shard's merges,
// full listings and reads in its key range: a new manifest version moves its entry to a
// quarantined list, which reads, merges, compactions and replays skip and clean-up never
// deletes, so the bytes stay for repair or forensics. It is never automatic: it makes the
// rows only that object held unreadable, which only an operator can prefer to a restore.

// QuarantineResult says what was set aside, or released (Release).
type QuarantineResult struct {
	// Kind is "generation", "wal" or "run".
	Kind string `json:"kind"`
	Path string `json:"path"`
	// Shard and Generation identify a quarantined generation; Shard a WAL object's too.
	Shard      string `json:"shard,omitempty"`
	Generation uint64 `json:"generation,omitempty"`
	// Rows is how many row versions the object holds, which reads stop (or, released, start)
	// seeing; 0 for a WAL object, whose rows are not counted.
	Rows   int64  `json:"rows"`
	MinKey string `json:"min_key"`
	MaxKey string `json:"max_key"`
	// AlreadyQuarantined: an earlier call set it aside; nothing changed.
	AlreadyQuarantined bool `json:"already_quarantined,omitempty"`
	// NotQuarantined: a release found the object live already; nothing changed.
	NotQuarantined bool `json:"not_quarantined,omitempty"`
	// ManifestVersion is the base or shard manifest version that records it.
	ManifestVersion uint64 `json:"manifest_version"`
}

// MaxQuarantineReasonBytes bounds a quarantine's reason, which every later version of the
// manifest that records it repeats.
const MaxQuarantineReasonBytes = 1024

// checkQuarantineReason refuses a reason that is blank, longer than MaxQuarantineReasonBytes,
// not valid UTF-8 or holding control characters (it is stored as JSON and logged as one line).
func checkQuarantineReason(reason string) error {
	switch {
	case strings.TrimSpace(reason) == "":
		return errors.New("a reason is required")
	case len(reason) > MaxQuarantineReasonBytes:
		return fmt.Errorf("the reason is %d bytes long, at most %d allowed", len(reason), MaxQuarantineReasonBytes)
	case !utf8.ValidString(reason):
		return errors.New("the reason is not valid UTF-8")
	case strings.IndexFunc(reason, unicode.IsControl) >= 0:
		return errors.New("the reason holds a control character")
	}
	return nil
}

// Quarantine sets aside the generation, WAL object or base run stored at key (the object key an
// ErrCorrupt names). Calling it again for the same key is a no-op.
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) Quarantine(ctx context.Context, key, reason string) (QuarantineResult, error) {
	if err := objstore.CheckKey(key); err != nil {
		return QuarantineResult{}, err
	}
	if err := checkQuarantineReason(reason); err != nil {
		return QuarantineResult{}, invalidf("quarantine %s: %v", key, err)
	}
	if strings.HasPrefix(key, dataPrefix(s.target)) {
		return s.quarantineRun(ctx, key, reason)
	}
	if rest, ok := strings.CutPrefix(key, memWALPrefix(s.target)); ok {
		if shard, file, ok := strings.Cut(rest, "/gen/"); ok && shard != "" && file != "" && !strings.Contains(file, "/") {
			return s.quarantineGen(ctx, shard, key, reason)
		}
		if shard, _, ok := strings.Cut(rest, "/wal/"); ok && shard != "" {
			if pos, ok := parseWALKey(walPrefix(s.target, shard), key); ok {
				return s.quarantineWAL(ctx, shard, pos, key, reason)
			}
		}
	}
	return QuarantineResult{}, invalidf("%s is not a generation, WAL object or base run of %s", key, s.target)
}

func (s *Store) quarantineRun(ctx context.Context, key, reason string) (QuarantineResult, error) {
	res := QuarantineResult{Kind: "run", Path: key}
	base, err := s.editBase(ctx, nil, func(base *manifest.Base) (*manifest.Base, error) {
		if q, ok := findQuarantined(base.Quarantined, key); ok {
			res.Rows, res.MinKey, res.MaxKey = q.Rows, q.MinKey, q.MaxKey
			res.AlreadyQuarantined = true
			return nil, nil
		}
		i := slices.IndexFunc(base.Runs, func(r manifest.Run) bool { return r.Path == key })
		if i < 0 {
			return nil, fmt.Errorf("run %s is not in base version %d of %s: %w", key, base.Version, s.target, ErrNotFound)
		}
		r := base.Runs[i]
		res.Rows, res.MinKey, res.MaxKey = r.Rows, r.MinKey, r.MaxKey
		next := base.Next("quarantine")
		next.Runs = slices.Delete(next.Runs, i, i+1) // the draft's own copy
		next.Quarantined = append(next.Quarantined, manifest.QuarantinedObject{Path: r.Path, Rows: r.Rows,
			MinKey: r.MinKey, MaxKey: r.MaxKey, Reason: reason, At: s.db.opts.Now().UTC()})
		return next, nil
	})
	if err != nil {
		return res, err
	}
	return s.settled(res, base.Version, reason), nil
}

// editBase publishes the version edit drafts from the latest base (base, when not nil, on the
// first try), drafting again on every lost race, and returns the version it published, or the
// one it drafted from when edit returned no draft.
//
// REQUIRES: mergeLock not held by the caller.
func (s *Store) editBase(ctx context.Context, base *manifest.Base, edit func(base *manifest.Base) (*manifest.Base, error)) (*manifest.Base, error) {
	for attempt := 0; attempt < 64; attempt++ {
		if base == nil {
			var err error
			if base, err = s.loadBase(ctx); err != nil {
				return nil, err
			}
		}
		next, err := edit(base)
		if err != nil || next == nil {
			return base, err
		}
		if _, err = s.publishBaseThenSwap(ctx, next); err == nil {
			return next, nil
		}
		if !errors.Is(err, ErrAlreadyExists) {
			return nil, err
		}
		backoff(ctx, attempt)
		base = nil
	}
	return nil, fmt.Errorf("%s: base edit kept losing races: %w", s.target, ErrConflict)
}

func (s *Store) quarantineGen(ctx context.Context, shard, key, reason string) (QuarantineResult, error) {
	res := QuarantineResult{Kind: "generation", Path: key, Shard: shard}
	err := s.setAsideInShard(ctx, shard, &res, reason, func(m *manifest.Shard) (bool, error) {
		if q, ok := findQuarantined(m.Quarantined, key); ok {
			res.Generation, res.Rows, res.MinKey, res.MaxKey = q.Gen, q.Rows, q.MinKey, q.MaxKey
			return true, nil
		}
		i := slices.IndexFunc(m.Flushed, func(g manifest.Gen) bool { return g.Path == key })
		if i < 0 {
			return false, fmt.Errorf("generation %s is not listed by shard %s of %s: %w", key, shard, s.target, ErrNotFound)
		}
		g := m.Flushed[i]
		res.Generation, res.Rows, res.MinKey, res.MaxKey = g.Gen, g.Rows, g.MinKey, g.MaxKey
		m.Quarantined = append(m.Quarantined, manifest.QuarantinedObject{Path: g.Path, Rows: g.Rows,
			MinKey: g.MinKey, MaxKey: g.MaxKey, Gen: g.Gen, Reason: reason, At: s.db.opts.Now().UTC()})
		m.Flushed = slices.Delete(m.Flushed, i, i+1) // m is editShard's draft, a copy
		return false, nil
	})
	return res, err
}

// quarantineWAL sets aside the WAL object at pos of shard: the next claim of the shard
// replays the objects around it and its seals never delete it. Its rows cannot be counted
// (it does not decode), so the result reports none.
func (s *Store) quarantineWAL(ctx context.Context, shard string, pos uint64, key, reason string) (QuarantineResult, error) {
	res := QuarantineResult{Kind: "wal", Path: key, Shard: shard}
	ok, err := s.db.bucket.Exists(ctx, key)
	if err != nil {
		return res, err
	}
	err = s.setAsideInShard(ctx, shard, &res, reason, func(m *manifest.Shard) (bool, error) {
		if _, ok := findQuarantined(m.Quarantined, key); ok {
			return true, nil
		}
		if !ok {
			return false, fmt.Errorf("WAL object %s of %s: %w", key, s.target, ErrNotFound)
		}
		if pos <= m.ReplayAfter {
			return false, invalidf("WAL object %s is at or below replay_after %d of shard %s: its rows are sealed, it is garbage the next seal deletes", key, m.ReplayAfter, shard)
		}
		m.Quarantined = append(m.Quarantined, manifest.QuarantinedObject{Path: key, Reason: reason, At: s.db.opts.Now().UTC()})
		return false, nil
	})
	return res, err
}

// setAsideInShard publishes the shard manifest that move makes, which adds res's object to
// the quarantined list or reports it there already (nothing is published then), and fills in
// res's outcome; a newly set-aside object is forgotten by the cache and logged.
func (s *Store) setAsideInShard(ctx context.Context, shard string, res *QuarantineResult, reason string, move func(m *manifest.Shard) (already bool, err error)) error {
	m, err := s.editShard(ctx, shard, func(m *manifest.Shard) (bool, error) {
		already, err := move(m)
		res.AlreadyQuarantined = already
		return !already, err
	})
	if err != nil {
		return err
	}
	*res = s.settled(*res, m.Version, reason)
	return nil
}

// settled is res recorded by manifest version: when that version set the object aside, or
// (reason "") released it, the object's cached decode and damage are forgotten (damaged again
// later, it counts again) and the change is logged.
func (s *Store) settled(res QuarantineResult, version uint64, reason string) QuarantineResult {
	res.ManifestVersion = version
	if res.AlreadyQuarantined || res.NotQuarantined {
		return res
	}
	s.db.cache.forget(res.Path)
	s.db.damaged.remove(res.Path)
	if reason == "" {
		s.db.log.Warn("quarantined object released: its rows are read again", zap.String("target", s.target.String()),
			zap.String("kind", res.Kind), zap.String("path", res.Path), zap.Int64("rows", res.Rows))
	} else {
		s.db.log.Warn("object quarantined: its rows are no longer read", zap.String("target", s.target.String()),
			zap.String("kind", res.Kind), zap.String("path", res.Path), zap.Int64("rows", res.Rows),
			zap.String("min_key", res.MinKey), zap.String("max_key", res.MaxKey), zap.String("reason", reason))
	}
	return res
}

// baseKeeps reports whether base lists the run at path, live or quarantined: either way no
// clean-up may delete it.
func baseKeeps(base *manifest.Base, path string) bool {
	_, quarantined := findQuarantined(base.Quarantined, path)
	return quarantined || base.References(path)
}

func findQuarantined(list []manifest.QuarantinedObject, key string) (manifest.QuarantinedObject, bool) {
	for _, q := range list {
		if q.Path == key {
			return q, true
		}
	}
	return manifest.QuarantinedObject{}, false
}
