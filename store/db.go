package store

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store/manifest"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// Options configure a DB: start from DefaultOptions; 0 is off or no cap where a field says so.
type Options struct {
	Logger  *zap.Logger
	Metrics *Metrics
	// InstanceID is this process's stable identity; its shard is ShardID(InstanceID).
	InstanceID string
	// Budget is the process-wide merge memory budget shared by every merge (nil = unlimited).
	Budget *Budget
	// ReadBudget bounds what concurrent reads decode outside the cache (read_bound.go;
	// nil = unlimited).
	ReadBudget *Budget
	// MergeMaxGenerations caps generations per merge pass (default 64, 0 = no cap).
	MergeMaxGenerations int
	// MergeMaxBytes stops a pass after the generation that reaches it (default 1 GiB; 0 = none,
	// so only the merge budget bounds the pass).
	MergeMaxBytes int64
	// PendingWarn logs a warning at this many pending generations in a shard (default 256).
	PendingWarn int
	// PendingMax refuses reads above this many pending generations, and this process's
	// writes and seals at it (default 4096, 0 = off).
	PendingMax int
	// MaxRowBytes rejects rows whose JSON encoding is larger (default 1 MiB, 0 = no limit).
	MaxRowBytes int
	// MaxAppendRows refuses larger appends, ErrAppendTooLarge (default 10000, 0 = no cap).
	MaxAppendRows int
	// MemtableBytes seals the active memtable at this many estimated decoded bytes and
	// refuses a larger append (append_limits.go). Default 64 MiB.
	MemtableBytes int64
	// GroupCommitWait is how long the WAL committer lingers for more appends (default 0).
	GroupCommitWait time.Duration
	// GroupCommitMaxRows stops a WAL commit gathering more appends once it holds this many rows
	// (default 8192); the append that reaches it is taken whole.
	GroupCommitMaxRows int
	// CacheBytes bounds decoded generations and runs kept for reads (default 256 MiB).
	CacheBytes int64
	// CompactDemandRuns: a merge commit that leaves at least this many base runs writes the
	// store's compaction marker in the demand index (default 32, 0 = no marker).
	CompactDemandRuns int
	// ResidentStoresMax bounds the stores this process keeps open, evicting the least
	// recently used (resident.go; default 4096, 0 = no cap).
	ResidentStoresMax int
	// ResidentIdle evicts a store unused for this long (default 10m, 0 = never).
	ResidentIdle time.Duration
	// StorageStallTimeout fails a storage operation without progress for this long with
	// ErrStalled (0 = the bucket's own, objstore.DefaultStallTimeout by default).
	StorageStallTimeout time.Duration
	// Now is the clock (tests); defaults to time.Now.
	Now func() time.Time
	// maxManifestBytes lowers MaxManifestBytes for tests (0 = MaxManifestBytes).
	maxManifestBytes int64
	// maxWALBytes sets the WAL read limit for tests (0 = walReadLimit's).
	maxWALBytes int64
}

// DefaultOptions returns the documented defaults of the fields whose zero means off or no cap.
func DefaultOptions() Options {
	o := Options{
		InstanceID:          "default",
		MergeMaxGenerations: 64,
		MergeMaxBytes:       1 << 30,
		PendingWarn:         256,
		PendingMax:          4096,
		MaxRowBytes:         1 << 20,
		MaxAppendRows:       10000,
		CompactDemandRuns:   32,
		ResidentStoresMax:   4096,
		ResidentIdle:        10 * time.Minute,
	}
	o.EnsureDefaults()
	return o
}

// EnsureDefaults fills the fields whose zero value means nothing (Logger, Now,
// GroupCommitMaxRows, CacheBytes, MemtableBytes); those where 0 means "off" or "no cap" are
// left as they are. OpenDBOnBucket calls it.
func (o *Options) EnsureDefaults() {
	o.Logger = cmp.Or(o.Logger, zap.NewNop())
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.GroupCommitMaxRows <= 0 {
		o.GroupCommitMaxRows = 8192
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 256 << 20
	}
	if o.MemtableBytes <= 0 {
		o.MemtableBytes = DefaultMemtableBytes
	}
}

// DB is one process's handle on a storage root: the registry of stores, the resident store
// handles, and this process's shard identity.
type DB struct {
	bucket *objstore.Bucket
	opts   Options
	log    *zap.Logger
	// metrics is opts.Metrics, or unregistered collectors when that is nil.
	metrics *Metrics
	shard   string
	cache   *fileCache
	// foreign rate-limits the warnings about keys walkeeper did not write (foreign.go).
	foreign foreignLog
	// damaged remembers the damaged objects met, each counted once (damaged.go).
	damaged keySet
	// appends is the budget the decoded rows of appends in flight are charged to.
	appends *Budget

	mu     sync.Mutex
	stores map[Target]*Store
	closed bool
	// claimed counts the stores an eviction has picked that are still in stores.
	claimed int
	// leaving holds evicted handles until their writer's final seal is published, so older
	// handles' reads still reach that writer.
	leaving map[Target]*Store
	// evictions counts evictions in flight (Close waits for them); Add only under mu while
	// not closed.
	evictions sync.WaitGroup
	// janitorStop and janitorDone: the idle-eviction goroutine (nil until started).
	janitorStop, janitorDone chan struct{}

	// locks serialises create, open and eviction per target inside this process.
	locks targetLocks
}

// OpenDB opens the storage root at url (file://, mem://, s3://, gs://, azblob://).
func OpenDB(ctx context.Context, url string, opts Options) (*DB, error) {
	b, err := objstore.OpenBucket(ctx, url)
	if err != nil {
		return nil, err
	}
	return OpenDBOnBucket(b, opts), nil
}

// OpenExistingDB opens the storage root at url as OpenDB does, but refuses a file:// root that
// does not exist (ErrInvalidInput) instead of creating it (objstore.OpenExistingBucket).
func OpenExistingDB(ctx context.Context, url string, opts Options) (*DB, error) {
	b, err := objstore.OpenExistingBucket(ctx, url)
	if err != nil {
		return nil, err
	}
	return OpenDBOnBucket(b, opts), nil
}

// OpenDBOnBucket opens a DB over an already-open bucket (fault-injection tests wrap one).
func OpenDBOnBucket(b *objstore.Bucket, opts Options) *DB {
	opts.EnsureDefaults()
	if opts.StorageStallTimeout > 0 {
		b = b.WithStallTimeout(opts.StorageStallTimeout)
	}
	metrics := cmp.Or(opts.Metrics, NewMetrics(nil, nil))
	// Counted where every operation of the DB's bucket ends, so each refused one once, with
	// no call site of the store to forget.
	b = b.WithRefusedAnswers(func(reason string) { metrics.StorageAnswersRefused.WithLabelValues(reason).Inc() })
	return &DB{
		bucket:  b,
		opts:    opts,
		log:     opts.Logger,
		metrics: metrics,
		shard:   ShardID(opts.InstanceID),
		cache:   newFileCache(opts.CacheBytes),
		stores:  map[Target]*Store{},
		leaving: map[Target]*Store{},
		damaged: keySet{limit: damagedMax},
		appends: NewBudget(appendBudgetFactor * opts.MemtableBytes),
	}
}

// Shard is this process's shard id.
func (db *DB) Shard() string { return db.shard }

// Bucket exposes the storage (tests and tools).
func (db *DB) Bucket() *objstore.Bucket { return db.bucket }

// Options returns the options the DB runs with.
func (db *DB) Options() Options { return db.opts }

// CreateOptions configure a new store.
type CreateOptions struct {
	// Schema is required for generic stores; rollout and datagen use their fixed schema
	// (a given schema must equal it).
	Schema *Schema
	// SealOnAppend makes every append visible to all readers before it returns. Always on
	// for datagen; chosen here for generic (default off); off for rollout.
	SealOnAppend *bool
}

// Create creates a store. ErrAlreadyExists if it exists (with any schema).
func (db *DB) Create(ctx context.Context, t Target, co CreateOptions) (*Store, error) {
	s, err := db.create(ctx, t, co)
	if err != nil {
		return nil, err
	}
	db.enforceMax(ctx, s)
	return s, nil
}

func (db *DB) create(ctx context.Context, t Target, co CreateOptions) (*Store, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	meta := manifest.StoreMeta{FormatVersion: FormatVersion, Kind: t.Kind, Name: t.Name, Key: rowcodec.KeyField(t.Kind), CreatedAt: db.opts.Now().UTC()}
	switch t.Kind {
	case KindGeneric:
		if co.Schema == nil {
			return nil, invalidf("generic store %s needs a schema", t)
		}
		meta.Schema = *co.Schema
		if co.SealOnAppend != nil {
			meta.SealOnAppend = *co.SealOnAppend
		}
	case KindRollout:
		meta.Schema = rowcodec.RolloutSchema()
		if co.SealOnAppend != nil && *co.SealOnAppend {
			return nil, invalidf("rollout stores do not seal on append")
		}
	case KindDatagen:
		meta.Schema = rowcodec.DatagenSchema()
		meta.SealOnAppend = true
		if co.SealOnAppend != nil && !*co.SealOnAppend {
			return nil, invalidf("datagen stores always seal on append")
		}
	}
	if co.Schema != nil && t.Kind != KindGeneric && !co.Schema.Equal(meta.Schema) {
		return nil, invalidf("%s stores have a fixed schema", t.Kind)
	}
	codec, err := rowcodec.NewCodec(t.Kind, meta.Schema) // validates the schema
	if err != nil {
		return nil, err
	}
	unlock := db.locks.lock(t)
	defer unlock()

	raw, _ := json.MarshalIndent(meta, "", "  ")
	err = db.bucket.PutIfAbsent(ctx, storeMetaKey(t), raw)
	switch {
	case errors.Is(err, ErrAlreadyExists):
		existing, rerr := db.readMeta(ctx, t)
		if rerr != nil {
			return nil, rerr
		}
		if rerr := db.registered(ctx, t); rerr == nil {
			return nil, fmt.Errorf("store %s: %w", t, ErrAlreadyExists)
		}
		// A create crashed or failed between store.json and the registry entry, or another
		// process is between them now. Finish it only if the caller asked for the same
		// store; otherwise the name is taken.
		if !existing.Schema.Equal(meta.Schema) {
			return nil, fmt.Errorf("store %s: %w", t, ErrSchemaMismatch)
		}
		if existing.SealOnAppend != meta.SealOnAppend {
			return nil, fmt.Errorf("store %s exists with another seal_on_append: %w", t, ErrAlreadyExists)
		}
		meta = existing
	case err != nil:
		return nil, err
	}
	reg, _ := json.Marshal(manifest.RegistryEntry{Kind: t.Kind, Name: t.Name, CreatedAt: meta.CreatedAt})
	if err := db.bucket.PutIfAbsent(ctx, registryKey(t), reg); err != nil && !errors.Is(err, ErrAlreadyExists) {
		return nil, err
	}
	return db.adopt(newStore(db, t, meta, codec))
}

func (db *DB) readMeta(ctx context.Context, t Target) (manifest.StoreMeta, error) {
	var meta manifest.StoreMeta
	raw, err := db.getSmall(ctx, storeMetaKey(t), maxStoreMetaBytes, "store.json of "+t.String())
	if err != nil {
		return meta, fmt.Errorf("store %s: %w", t, err)
	}
	if err := decodeJSONObject(raw, &meta, "store.json of "+t.String()); err != nil {
		return meta, err
	}
	if meta.FormatVersion > FormatVersion {
		return meta, corruptf("store %s has format version %d, this build reads %d", t, meta.FormatVersion, FormatVersion)
	}
	if meta.Kind != t.Kind || meta.Name != t.Name {
		return meta, corruptf("store.json of %s names %s:%s", t, meta.Kind, meta.Name)
	}
	if err := rowcodec.ValidateSchema(t.Kind, meta.Schema); err != nil {
		return meta, corruptf("store.json of %s: %v", t, err)
	}
	return meta, nil
}

// Open returns the resident handle for an existing store. ErrNotFound if it is not registered;
// nothing of a store that does not exist is kept.
func (db *DB) Open(ctx context.Context, t Target) (*Store, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil, ErrClosed
	}
	if s, ok := db.stores[t]; ok {
		db.mu.Unlock()
		s.touch()
		return s, nil
	}
	db.mu.Unlock()
	s, err := db.openSlow(ctx, t)
	if err != nil {
		return nil, err
	}
	db.enforceMax(ctx, s)
	return s, nil
}

// openSlow makes the resident handle of t from its store.json, unless another Open made it
// while this one waited for the target's lock.
func (db *DB) openSlow(ctx context.Context, t Target) (*Store, error) {
	unlock := db.locks.lock(t)
	defer unlock()
	db.mu.Lock()
	s, ok := db.stores[t]
	db.mu.Unlock()
	if ok {
		s.touch()
		return s, nil
	}
	if err := db.registered(ctx, t); err != nil {
		return nil, fmt.Errorf("store %s: %w", t, err)
	}
	meta, err := db.readMeta(ctx, t)
	if err != nil {
		return nil, err
	}
	codec, err := rowcodec.NewCodec(t.Kind, meta.Schema)
	if err != nil {
		return nil, corruptf("store %s: %v", t, err)
	}
	return db.adopt(newStore(db, t, meta, codec))
}

// StoreInfo is one registry entry.
type StoreInfo struct {
	Target    Target    `json:"-"`
	Kind      Kind      `json:"kind"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Resident returns the stores this process has open, in target order.
func (db *DB) Resident() []*Store {
	db.mu.Lock()
	out := slices.Collect(maps.Values(db.stores))
	db.mu.Unlock()
	slices.SortFunc(out, func(a, b *Store) int { return cmp.Compare(a.target.String(), b.target.String()) })
	return out
}

// Recover replays and seals the rows every registered store's WAL in this process's shard
// holds unsealed (a crash or kill), so readers see them even if this process never writes
// to that store again.
func (db *DB) Recover(ctx context.Context) (int, error) {
	// Paged, so a worker's memory at start does not grow with the fleet; the listings still
	// do, so this runs once in the background, recoverParallel stores at a time.
	var (
		mu, replay        sync.Mutex
		recovered, failed int
		errs              []error
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if failed++; len(errs) < maxRecoverErrors {
			errs = append(errs, err)
		}
	}
	recover1 := func(t Target) {
		positions, err := db.listWAL(ctx, t, db.shard)
		if err != nil {
			fail(err)
			return
		}
		if len(positions) == 0 {
			return
		}
		// Replays take turns: each holds a memtable of the store's WAL until its seal, and
		// only the listings, not the replays, grow with the registry.
		replay.Lock()
		defer replay.Unlock()
		s, err := db.Open(ctx, t)
		if err != nil {
			fail(err)
			return
		}
		res, err := s.Flush(ctx)
		if err != nil {
			fail(fmt.Errorf("recover %s: %w", t, err))
			return
		}
		if res.Sealed {
			mu.Lock()
			recovered++
			mu.Unlock()
		}
	}
	var g errgroup.Group
	g.SetLimit(recoverParallel)
	for _, kind := range Kinds {
		err := db.eachStore(ctx, kind, func(info StoreInfo) {
			g.Go(db.guard("recovery of "+info.Target.String(), func() error { recover1(info.Target); return nil }))
		})
		if err != nil {
			fail(err)
		}
	}
	if err := g.Wait(); err != nil { // recover1 reports through fail; this is a panic of one
		fail(err)
	}
	if failed > len(errs) {
		errs = append(errs, fmt.Errorf("and %d more recovery errors", failed-len(errs)))
	}
	return recovered, errors.Join(errs...)
}

// recoverParallel is how many stores Recover lists at once; it replays one at a time.
const recoverParallel = 16

// maxRecoverErrors bounds the errors Recover returns (the rest are counted).
const maxRecoverErrors = 10

// Close stops evictions, seals every resident writer's memtable and closes the bucket.
func (db *DB) Close(ctx context.Context) error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	db.mu.Unlock()
	db.stopEvictions()
	var errs []error
	for _, s := range db.Resident() {
		if err := s.close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("close %s: %w", s.target, err))
		}
	}
	db.cache.clear()
	if err := db.bucket.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
