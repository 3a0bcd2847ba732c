package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// benchSchema is a key, a number and a binary payload that sets the row size.
var benchSchema = store.Schema{Fields: []store.Field{
	{Name: "id", Type: store.TypeString},
	{Name: "n", Type: store.TypeInt64, Nullable: true},
	{Name: "payload", Type: store.TypeBinary, Nullable: true},
}}

func genericRow(key string, n int64, payload []byte) store.Row {
	return store.Row{Key: key, Values: []any{key, n, payload}}
}

// rolloutRow is a small rollout record: its first seven fields set, the others null.
func rolloutRow(key string, step int64) store.Row {
	vals := []any{key, "run-bench", step, "prompt", "completion", 0.5, false}
	return store.Row{Key: key, Values: append(vals, make([]any, len(rowcodec.RolloutSchema().Fields)-len(vals))...)}
}

// payloadOf returns n bytes that compress poorly (so Parquet sizes track the input).
func payloadOf(n int, seed int64) []byte {
	b := make([]byte, n)
	x := uint64(seed)*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// storeOptions are the store defaults with scenario tweaks.
func storeOptions(instance string, log *zap.Logger, tweak ...func(*store.Options)) store.Options {
	o := store.DefaultOptions()
	o.InstanceID = instance
	o.Logger = log
	// A trusted writer of 64 MiB generations; clients' append bounds are the hostile scenario's.
	o.MaxAppendRows = 0
	o.MemtableBytes = 1 << 30
	for _, f := range tweak {
		f(&o)
	}
	return o
}

// openAs opens t in a DB of its own on url, as another process would, creating a generic t that
// does not exist yet; the caller closes the DB.
func openAs(ctx context.Context, url, instance string, log *zap.Logger, t store.Target, tweak ...func(*store.Options)) (*store.DB, *store.Store, error) {
	db, err := store.OpenDB(ctx, url, storeOptions(instance, log, tweak...))
	if err != nil {
		return nil, nil, err
	}
	s, err := db.Open(ctx, t)
	if errors.Is(err, store.ErrNotFound) && t.Kind == store.KindGeneric {
		s, err = createGeneric(ctx, db, t.Name)
	}
	if err != nil {
		_ = db.Close(context.WithoutCancel(ctx))
		return nil, nil, err
	}
	return db, s, nil
}

// noPendingCaps lifts the pending caps: scenarios leave more pending than a writer may.
func noPendingCaps(so *store.Options) { so.PendingMax = 0; so.PendingWarn = 0 }

// noMergeCaps lifts a merge's size caps: the scenarios time merges of every pending generation.
func noMergeCaps(so *store.Options) { so.MergeMaxGenerations = 0; so.MergeMaxBytes = 0 }

// compactBase compacts s's base at 32 runs, as the sweep would: production-sized manifests.
func compactBase(ctx context.Context, s *store.Store) error {
	st, err := s.Stats(ctx)
	if err == nil && st.Runs >= 32 {
		_, err = s.CompactBase(ctx, store.CompactParams{MaxRuns: 32})
	}
	return err
}

// createOptsFor creates a store of kind k: generic stores with benchSchema.
func createOptsFor(k store.Kind) store.CreateOptions {
	if k == store.KindGeneric {
		return store.CreateOptions{Schema: &benchSchema}
	}
	return store.CreateOptions{}
}

func createGeneric(ctx context.Context, db *store.DB, name string) (*store.Store, error) {
	f := false
	return db.Create(ctx, genericTarget(name), store.CreateOptions{Schema: &benchSchema, SealOnAppend: &f})
}

// sealRows appends rows to s and seals them: one generation.
func sealRows(ctx context.Context, s *store.Store, rows ...store.Row) error {
	if _, err := s.Append(ctx, rows); err != nil {
		return err
	}
	_, err := s.Flush(ctx)
	return err
}

// writeGenerations seals gens generations of rows rows with keys cycling over keySpace.
func writeGenerations(ctx context.Context, s *store.Store, gens, rows, payload, keySpace int, seed int64) error {
	for g := 0; g < gens; g++ {
		batch := make([]store.Row, rows)
		for i := range batch {
			n := seed + int64(g*rows+i)
			batch[i] = genericRow(fmt.Sprintf("k%09d", n%int64(max(keySpace, 1))), n, payloadOf(payload, n))
		}
		if err := sealRows(ctx, s, batch...); err != nil {
			return err
		}
	}
	return nil
}

// writeStore writes gens generations to generic store name on url as writer instance (creating it
// if need be), closes the writer and returns its shard.
func writeStore(ctx context.Context, o Options, url, instance, name string, gens, rows, payload, keySpace int, seed int64) (string, error) {
	db, s, err := openAs(ctx, url, instance, o.logger(), genericTarget(name))
	if err != nil {
		return "", err
	}
	err = writeGenerations(ctx, s, gens, rows, payload, keySpace, seed)
	return db.Shard(), errors.Join(err, db.Close(ctx))
}

func genericTarget(name string) store.Target {
	return store.Target{Kind: store.KindGeneric, Name: name}
}

// memURL returns a fresh mem:// URL (mem buckets live for the whole process).
func memURL(name string) string {
	return fmt.Sprintf("mem://walkeeper-bench-%s-%d-%d", name, time.Now().UnixNano(), memSeq.Add(1))
}

var memSeq atomic.Int64

// fileURL returns a file:// URL for dir; nosync skips fsync.
func fileURL(dir string, nosync bool) string {
	u := "file://" + dir
	if nosync {
		u += "?nosync=1"
	}
	return u
}

// eachN runs f(0) to f(n-1) in order, limit at a time, and returns the first error.
func eachN(limit, n int, f func(i int) error) error {
	var g errgroup.Group
	g.SetLimit(limit)
	for i := range n {
		g.Go(func() error { return f(i) })
	}
	return g.Wait()
}

// every runs f every d until ctx ends (goroutine counted by wg), dropping missed ticks.
func every(ctx context.Context, wg *sync.WaitGroup, d time.Duration, f func()) {
	wg.Go(func() {
		tk := time.NewTicker(d)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
				f()
			}
		}
	})
}

// poll runs f every d (as every does) until the returned stop, which waits for the last call.
func poll(d time.Duration, f func()) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	every(ctx, &wg, d, f)
	return func() { cancel(); wg.Wait() }
}

func raiseTo(a *atomic.Int64, v int64) {
	for m := a.Load(); v > m && !a.CompareAndSwap(m, v); m = a.Load() {
	}
}

// latencyFaults delays and counts storage requests: a modelled object-store round trip.
type latencyFaults struct {
	d        atomic.Int64 // nanoseconds; 0 = off
	requests atomic.Int64
	// inFlight counts requests between Before and After; maxInFlight is its peak.
	inFlight, maxInFlight atomic.Int64
}

func (l *latencyFaults) Before(op, key string) error {
	l.requests.Add(1)
	raiseTo(&l.maxInFlight, l.inFlight.Add(1))
	if d := time.Duration(l.d.Load()); d > 0 {
		time.Sleep(d)
	}
	return nil
}

func (l *latencyFaults) After(op, key string, err error) error {
	l.inFlight.Add(-1)
	return err
}

// openLatencyDB opens url with every request going through faults.
func openLatencyDB(ctx context.Context, url string, f objstore.Faults, opts store.Options) (*store.DB, error) {
	b, err := objstore.OpenBucket(ctx, url)
	if err != nil {
		return nil, err
	}
	return store.OpenDBOnBucket(b.WithFaults(f), opts), nil
}
