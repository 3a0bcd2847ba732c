package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

// SoakEnv switches every test to its long version (see docs/RELIABILITY.md).
const SoakEnv = "WALKEEPER_SOAK"

func soak() bool { return os.Getenv(SoakEnv) == "1" }

// commitOne commits p as a round of one, as the commit activity does for a one-shard round:
// the shard's result, and a stale shard as its ErrStalePreparation.
func commitOne(ctx context.Context, s *store.Store, p *store.PreparedMerge) (store.RoundShardResult, error) {
	rr, err := s.CommitRound(ctx, []*store.PreparedMerge{p})
	if len(rr.Shards) == 0 {
		return store.RoundShardResult{}, err
	}
	if err == nil {
		err = rr.Shards[0].Err()
	}
	return rr.Shards[0], err
}

// pick returns the short or the soak value; env, when set to a value parse accepts,
// overrides both.
func pick[T any](short, long T, env string, parse func(string) (T, error)) T {
	if s := os.Getenv(env); s != "" {
		if v, err := parse(s); err == nil {
			return v
		}
	}
	if soak() {
		return long
	}
	return short
}

func pickDuration(short, long time.Duration, env string) time.Duration {
	return pick(short, long, env, time.ParseDuration)
}

func pickInt(short, long int, env string) int { return pick(short, long, env, strconv.Atoi) }

var urlSeq atomic.Int64

func memURL(t testing.TB) string {
	return fmt.Sprintf("mem://reliability-%d-%d", os.Getpid(), urlSeq.Add(1))
}

// fileURL is a file:// root in the test's temp dir. nosync skips fsync: atomicity (link,
// rename) is unchanged and process kills never lose page-cache data, so only a power loss
// could tell the difference, which these tests do not simulate.
func fileURL(t testing.TB) string {
	return "file://" + t.TempDir() + "?nosync=1"
}

var target = store.Target{Kind: store.KindGeneric, Name: "rel"}

// openDB opens a DB on its own bucket handle (so closing one DB never closes another's),
// with faults (nil = none).
func openDB(ctx context.Context, url, instance string, faults objstore.Faults, tweak func(*store.Options)) (*store.DB, error) {
	b, err := objstore.OpenBucket(ctx, url)
	if err != nil {
		return nil, err
	}
	opts := store.DefaultOptions()
	opts.InstanceID = instance
	if tweak != nil {
		tweak(&opts)
	}
	if faults != nil {
		b = b.WithFaults(faults)
	}
	return store.OpenDBOnBucket(b, opts), nil
}

func mustOpenDB(t testing.TB, url, instance string, faults objstore.Faults, tweak func(*store.Options)) *store.DB {
	t.Helper()
	db, err := openDB(context.Background(), url, instance, faults, tweak)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	return db
}

// mustStore is createOrOpen that fails the test on an error.
func mustStore(t testing.TB, db *store.DB) *store.Store {
	t.Helper()
	s, err := createOrOpen(context.Background(), db)
	require.NoError(t, err)
	return s
}

// mustSeal appends rows to s and seals them into one generation.
func mustSeal(t testing.TB, s *store.Store, rows ...store.Row) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, errOf(s.Append(ctx, rows)))
	require.NoError(t, errOf(s.Flush(ctx)))
}

// createOrOpen creates the reliability store or opens it, retrying transient errors for
// up to a minute (faults may be on).
func createOrOpen(ctx context.Context, db *store.DB) (s *store.Store, err error) {
	_, err = retry(time.Minute, func() error {
		if s, err = db.Create(ctx, target, store.CreateOptions{Schema: &Schema}); errors.Is(err, store.ErrAlreadyExists) {
			s, err = db.Open(ctx, target)
		}
		return err
	})
	return s, err
}

// retry calls f until it succeeds or d passes.
func retry(d time.Duration, f func() error) (int, error) {
	deadline := time.Now().Add(d)
	for n := 0; ; n++ {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return n, err
		}
		time.Sleep(time.Duration(1+n%10) * time.Millisecond)
	}
}

// childModes maps a child mode to its body. Bodies return an error to fail the child (exit 1).
var childModes = map[string]func(ctx context.Context, arg json.RawMessage) error{}

// TestReliabilityChild is not a test: it is the entry point of child processes started by
// StartChild. Run directly it skips.
func TestReliabilityChild(t *testing.T) {
	mode := os.Getenv(ChildModeEnv)
	if mode == "" {
		t.Skip("child-process entry point; runs only when started by the reliability harness")
	}
	f, ok := childModes[mode]
	if !ok {
		t.Fatalf("unknown child mode %q", mode)
	}
	if err := f(context.Background(), json.RawMessage(os.Getenv(ChildArgEnv))); err != nil {
		t.Fatalf("child %s: %v", mode, err)
	}
}

// readChecked reads every row of tg through a fresh reader (instance) on storage and reports,
// each error prefixed with what, the keys read twice and every oracle violation. It returns
// the reader's DB and store, and the rows.
func readChecked(t *testing.T, storage, instance string, tg store.Target, oracle *Oracle, what string) (*store.DB, *store.Store, map[string]int64) {
	t.Helper()
	ctx := context.Background()
	db := mustOpenDB(t, storage, instance, nil, nil)
	s, err := db.Open(ctx, tg)
	require.NoError(t, err)
	all, dups, err := ReadAll(ctx, s, store.SourceAll, 1000)
	require.NoError(t, err)
	assert.Empty(t, dups, "%s: keys read twice", what)
	assert.Empty(t, oracle.Verify(all), "%s: oracle violations", what)
	return db, s, all
}

// errOf is the error of a call whose value the test does not need.
func errOf[T any](_ T, err error) error { return err }

// mergeAll runs MergeAll on s until no shard has anything pending (giving up after passes+2
// runs) and returns the generations reclaimed.
func mergeAll(ctx context.Context, s *store.Store, passes int) (int, error) {
	total := 0
	for pass := 0; ; pass++ {
		n, err := s.MergeAll(ctx)
		if err != nil {
			return total, fmt.Errorf("merge all: %w", err)
		}
		total += n
		pend, err := s.PendingShards(ctx)
		if err != nil || len(pend) == 0 {
			return total, err
		}
		if pass > passes {
			return total, fmt.Errorf("pending never reached 0: %+v", pend)
		}
	}
}
