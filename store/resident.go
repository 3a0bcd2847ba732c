package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Resident stores are the handles this process keeps open (DB.stores); one idle for
// ResidentIdle, or least recently used beyond ResidentStoresMax, is sealed and dropped, and a
// handle a caller still holds forwards to the next one (Store.writer).

// Eviction reasons: the reason label of walkeeper_resident_evictions_total.
const (
	EvictIdle = "idle"
	EvictMax  = "max"
)

// evictTimeout bounds the seals of one eviction, which must finish whoever asked for it.
const evictTimeout = time.Minute

// maxEvictAttempts bounds the evictions one enforceMax (after a Create or Open, or the
// janitor's pass) makes to get back under the max.
const maxEvictAttempts = 8

// targetLocks serialises create, open and eviction per target; an entry lives only while held
// or waited for.
type targetLocks struct {
	mu   sync.Mutex
	held map[Target]*targetLock
}

type targetLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; guarded by targetLocks.mu
}

// lock takes t's lock and returns its release.
func (l *targetLocks) lock(t Target) (unlock func()) {
	l.mu.Lock()
	if l.held == nil {
		l.held = map[Target]*targetLock{}
	}
	tl := l.held[t]
	if tl == nil {
		tl = &targetLock{}
		l.held[t] = tl
	}
	tl.refs++
	l.mu.Unlock()
	tl.mu.Lock()
	return func() {
		tl.mu.Unlock()
		l.mu.Lock()
		if tl.refs--; tl.refs == 0 {
			delete(l.held, t)
		}
		l.mu.Unlock()
	}
}

// touch records a use of the handle: idle and least-recently-used eviction go by it.
func (s *Store) touch() { s.lastUsed.Store(s.db.opts.Now().UnixNano()) }

// liveHandle is the handle whose writer holds t's memtable: the resident one, or the one
// being evicted until its final seal is published.
func (db *DB) liveHandle(t Target) *Store {
	db.mu.Lock()
	defer db.mu.Unlock()
	if s, ok := db.stores[t]; ok {
		return s
	}
	return db.leaving[t]
}

// adopt makes s the resident handle of its target, or returns the one already resident.
//
// REQUIRES: the caller holds the target's lock (db.locks), so no eviction of the target
// runs meanwhile.
func (db *DB) adopt(s *Store) (*Store, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, ErrClosed
	}
	if old, ok := db.stores[s.target]; ok {
		return old, nil
	}
	db.stores[s.target] = s
	db.metrics.ResidentStores.Set(float64(len(db.stores)))
	if db.opts.ResidentIdle > 0 && db.janitorStop == nil {
		db.startJanitorLocked()
	}
	return s, nil
}

// claimLocked marks s as taken by an eviction, so that no other eviction picks it.
//
// REQUIRES: db.mu held, db not closed, s resident and not claimed.
func (db *DB) claimLocked(s *Store) evictClaim {
	s.claimed = true
	db.claimed++
	db.evictions.Add(1)
	return evictClaim{s: s, seen: s.lastUsed.Load()}
}

// evictClaim is a store picked for eviction and its last use then: a later use saves it.
type evictClaim struct {
	s    *Store
	seen int64
}

// claimLRU claims the least recently used unclaimed store other than keep while more than
// the max unclaimed ones are resident.
func (db *DB) claimLRU(keep *Store) (evictClaim, bool) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed || db.opts.ResidentStoresMax <= 0 || len(db.stores)-db.claimed <= db.opts.ResidentStoresMax {
		return evictClaim{}, false
	}
	var victim *Store
	for _, s := range db.stores {
		if s != keep && !s.claimed && (victim == nil || s.lastUsed.Load() < victim.lastUsed.Load()) {
			victim = s
		}
	}
	if victim == nil {
		return evictClaim{}, false
	}
	return db.claimLocked(victim), true
}

// claimIdle claims every unclaimed store last used at or before cutoff (unix nanoseconds).
func (db *DB) claimIdle(cutoff int64) []evictClaim {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	var out []evictClaim
	for _, s := range db.stores {
		if !s.claimed && s.lastUsed.Load() <= cutoff {
			out = append(out, db.claimLocked(s))
		}
	}
	return out
}

// enforceMax evicts least recently used stores other than keep until at most
// ResidentStoresMax are resident.
//
// REQUIRES: the caller holds no target lock (eviction takes the victim's).
func (db *DB) enforceMax(ctx context.Context, keep *Store) {
	for range maxEvictAttempts {
		c, ok := db.claimLRU(keep)
		if !ok {
			return
		}
		if _, err := db.evict(ctx, c, EvictMax); err != nil {
			return // logged and counted; the next Open or janitor pass tries again
		}
	}
}

// evictIdle evicts every store idle for at least ResidentIdle.
func (db *DB) evictIdle(ctx context.Context) {
	if db.opts.ResidentIdle <= 0 {
		return
	}
	for _, c := range db.claimIdle(db.opts.Now().Add(-db.opts.ResidentIdle).UnixNano()) {
		_, _ = db.evict(ctx, c, EvictIdle)
	}
}

// evict seals the claimed store's writer, stops it and drops the handle, and reports whether
// it did. A store used since it was claimed, or whose first seal fails, stays resident; one
// whose final seal leaves rows unsealed stays resident with its dead writer, which still
// answers reads (decision 0611). The handle leaves DB.stores under the target's lock, so two
// writers never overlap, and reads see the dying writer until its seal is published.
func (db *DB) evict(ctx context.Context, c evictClaim, reason string) (evicted bool, err error) {
	s := c.s
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), evictTimeout)
	defer cancel()
	defer db.evictions.Done()
	defer func() {
		if !evicted {
			db.mu.Lock()
			s.claimed = false
			db.claimed--
			db.mu.Unlock()
		}
		db.countEviction(s, reason, evicted, err)
	}()
	w, _ := s.handle()
	switch {
	case w == nil:
	case w.alive():
		if _, err := w.seal(ctx, false); err != nil {
			return false, fmt.Errorf("evict %s: seal: %w", s.target, err)
		}
		if w.holdsRows() && w.atPendingMax() { // the final seal could not write them either
			return false, fmt.Errorf("evict %s: its rows stay unsealed while its shard is at the pending limit: %w", s.target, ErrTooManyPending)
		}
	default:
		// A dead writer's acknowledged rows may be in the WAL only: Flush replays and seals them.
		if _, err := s.Flush(ctx); err != nil {
			return false, fmt.Errorf("evict %s: flush: %w", s.target, err)
		}
	}
	unlock := db.locks.lock(s.target)
	defer unlock()
	// Under writerMu an append either pinned the writer before this check, or finds the
	// handle evicted and goes to the next one, so retire never stops a writer in use.
	s.writerMu.Lock()
	if s.lastUsed.Load() != c.seen || s.pins.Load() > 0 {
		s.writerMu.Unlock()
		return false, nil // used since it was picked: no longer idle, no longer least recent
	}
	db.mu.Lock()
	delete(db.stores, s.target)
	db.leaving[s.target] = s
	db.claimed--
	db.metrics.ResidentStores.Set(float64(len(db.stores)))
	db.mu.Unlock()
	s.evicted = true
	w = s.w
	s.writerMu.Unlock()
	if w != nil {
		err = w.retire(ctx)
	}
	// On failure the rows may be in the WAL only: the store stays resident until they are sealed.
	db.mu.Lock()
	delete(db.leaving, s.target)
	if err != nil {
		db.stores[s.target] = s // no Open made another: it waits for the target's lock
		db.claimed++            // the deferred release of the claim takes it back
		db.metrics.ResidentStores.Set(float64(len(db.stores)))
	}
	db.mu.Unlock()
	s.writerMu.Lock()
	if err != nil {
		s.evicted = false
	} else {
		s.w = nil
	}
	s.writerMu.Unlock()
	return err == nil, err
}

// countEviction logs and counts one eviction attempt.
func (db *DB) countEviction(s *Store, reason string, evicted bool, err error) {
	result := "evicted"
	switch {
	case err != nil:
		result = "failed"
		db.log.Warn("could not evict a resident store; it stays resident", zap.String("target", s.target.String()),
			zap.String("reason", reason), zap.Error(err))
	case !evicted:
		return // used again since it was picked
	default:
		db.log.Debug("evicted a resident store", zap.String("target", s.target.String()), zap.String("reason", reason))
	}
	db.metrics.ResidentEvictions.WithLabelValues(reason, result).Inc()
}

// startJanitorLocked starts the goroutine that evicts idle stores and retries the max.
//
// REQUIRES: db.mu held, db not closed, ResidentIdle > 0.
func (db *DB) startJanitorLocked() {
	stop, done := make(chan struct{}), make(chan struct{})
	db.janitorStop, db.janitorDone = stop, done
	every := min(max(db.opts.ResidentIdle/4, 10*time.Millisecond), time.Minute)
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		ctx := context.Background() // an eviction runs to its own timeout (evict)
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				func() {
					defer db.recoverPanic("resident janitor", nil)
					db.evictIdle(ctx)
					db.enforceMax(ctx, nil)
				}()
			}
		}
	}()
}

// stopEvictions stops the janitor and waits for it and for every eviction in flight.
//
// REQUIRES: db.closed already set (no new eviction can be claimed).
func (db *DB) stopEvictions() {
	db.mu.Lock()
	stop, done := db.janitorStop, db.janitorDone
	db.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	db.evictions.Wait()
}
