package reliability

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/store"
)

// isRowNotFound reports the store's "no such row" answer (as opposed to a file that
// vanished under a concurrent merge, or an unknown store).
func isRowNotFound(err error) bool {
	return errors.Is(err, store.ErrNotFound) && strings.Contains(err.Error(), "row: "+store.ErrNotFound.Error())
}

// loadCounters are the outcomes of one mixed-load run; every failed call is retried or
// counted, never silently dropped.
type loadCounters struct {
	appendOK, appendFailed, rowsAcked, rowsUnacked   atomic.Int64
	flushOK, flushFailed                             atomic.Int64
	prepareOK, prepareEmpty, prepareFailed           atomic.Int64
	commitOK, commitAlready, commitRetried, stale    atomic.Int64
	abortOK, abortRetried                            atomic.Int64
	readOK, readMissing, readFailed                  atomic.Int64
	listOK, listFailed                               atomic.Int64
	readViolations, listViolations                   atomic.Int64
	fencedAppends, notSealedAppends, otherAppendErrs atomic.Int64
}

// progressed tells whether appends, commits and reads have each succeeded at least once. A
// commit whose clean-up failed after the publish is retried and then answers "already
// committed": it landed all the same, so it counts.
func (c *loadCounters) progressed() bool {
	return c.appendOK.Load() > 0 && c.commitOK.Load()+c.commitAlready.Load() > 0 && c.readOK.Load() > 0
}

func (c *loadCounters) String() string {
	return fmt.Sprintf("appends ok=%d failed=%d (fenced=%d durable-not-sealed=%d other=%d) rows acked=%d unacked=%d; "+
		"flush ok=%d failed=%d; prepare ok=%d empty=%d failed(retried)=%d; commit ok=%d already=%d retried=%d stale=%d; "+
		"abort ok=%d retried=%d; get ok=%d absent=%d failed=%d; full listings=%d (failed pages retried=%d); violations read=%d list=%d",
		c.appendOK.Load(), c.appendFailed.Load(), c.fencedAppends.Load(), c.notSealedAppends.Load(), c.otherAppendErrs.Load(),
		c.rowsAcked.Load(), c.rowsUnacked.Load(),
		c.flushOK.Load(), c.flushFailed.Load(), c.prepareOK.Load(), c.prepareEmpty.Load(), c.prepareFailed.Load(),
		c.commitOK.Load(), c.commitAlready.Load(), c.commitRetried.Load(), c.stale.Load(),
		c.abortOK.Load(), c.abortRetried.Load(), c.readOK.Load(), c.readMissing.Load(), c.readFailed.Load(),
		c.listOK.Load(), c.listFailed.Load(), c.readViolations.Load(), c.listViolations.Load())
}

// attemptLog remembers what every merge attempt staged and how it ended, so that a staged
// file left behind can be traced to the attempt (and the code path) that leaked it.
type attemptLog struct {
	mu       sync.Mutex
	outcomes map[string]string // staged path -> outcome
	failed   map[string]int    // attempt key -> prepares that returned an error
}

func (a *attemptLog) record(p *store.PreparedMerge, outcome string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, f := range p.Staged {
		a.outcomes[f.Path] = p.AttemptKey + " " + outcome
	}
}

func (a *attemptLog) prepareFailed(key string) {
	a.mu.Lock()
	a.failed[key]++
	a.mu.Unlock()
}

func (a *attemptLog) explain(path string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if o, ok := a.outcomes[path]; ok {
		return o
	}
	return "written by a Prepare that returned an error (its retry, same attempt key, staged other generations)"
}

type faultLoad struct {
	t        *testing.T
	url      string
	dur      time.Duration
	shards   int
	inj      *Injector
	oracle   *Oracle
	c        loadCounters
	attempts attemptLog
	errs     chan string
	started  time.Time // when the load started
}

// loadCap bounds the load's extension, in multiples of its duration.
const loadCap = 10

// loading tells the load's goroutines to go on: for the load's duration, then until appends,
// commits and reads have each succeeded, up to loadCap times the duration. A loaded machine
// once got no read through in 6 s; that is a slow run, not a store that fails.
func (l *faultLoad) loading() bool {
	ran := time.Since(l.started)
	return ran < l.dur || (ran < loadCap*l.dur && !l.c.progressed())
}

func (l *faultLoad) violation(format string, args ...any) {
	select {
	case l.errs <- fmt.Sprintf(format, args...):
	default:
	}
}

// TestStorageFaultsMixedLoad: appends, seals, point reads, full listings and merges from
// several shards (DB handles) on one root while the bucket fails ≥ 5% of all calls, delays
// some, and reports 5% of successful Put/PutIfAbsent calls as failed. Merges follow the
// workflow's protocol: a failed Prepare is retried with the same attempt key, a failed
// Commit is retried, StalePreparation is aborted. Then faults stop, everything is sealed
// and merged, and the oracle checks every acknowledged row; the layout is checked for
// leftovers.
func TestStorageFaultsMixedLoad(t *testing.T) {
	// Parallel with the Temporal test, which mostly waits (heartbeat timeouts, server
	// restarts): the default run stays well under three minutes on two cores.
	t.Parallel()
	dur := pickDuration(10*time.Second, 10*time.Minute, "WALKEEPER_FAULTS_DURATION")
	if raceEnabled && !soak() {
		dur = 6 * time.Second
	}
	for _, backend := range []string{"mem", "file", "s3"} {
		t.Run(backend, func(t *testing.T) {
			url := memURL(t)
			switch backend {
			case "file":
				url = fileURL(t)
			case "s3":
				// The in-process S3-compatible server (gofakes3 behind the conditional-write
				// wrapper), reached over HTTP through gocloud's s3blob; faults are injected
				// on the client side, as on the other backends.
				url = startS3(t)
			}
			l := &faultLoad{
				t: t, url: url, dur: dur, shards: 3, oracle: NewOracle(),
				attempts: attemptLog{outcomes: map[string]string{}, failed: map[string]int{}},
				errs:     make(chan string, 64),
				inj: NewInjector(InjectorConfig{
					ErrorRate: 0.06, GhostRate: 0.05, SpikeRate: 0.02, SpikeMax: 25 * time.Millisecond,
				}),
			}
			l.run()
		})
	}
}

var s3EnvOnce sync.Once

// startS3 starts an in-process S3 server with a fresh bucket for a parallel test: the test
// credentials go into the process environment once (t.Setenv is not allowed in parallel
// tests; nothing else in this package reads AWS_* variables differently).
func startS3(t *testing.T) string {
	t.Helper()
	s3EnvOnce.Do(func() {
		for k, v := range s3test.Env() {
			_ = os.Setenv(k, v)
		}
	})
	srv, err := s3test.New(s3test.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	bucket := s3test.NewBucketName()
	require.NoError(t, srv.CreateBucket(bucket))
	return srv.BucketURL(bucket)
}

func (l *faultLoad) run() {
	t := l.t
	ctx := context.Background()
	tweak := func(o *store.Options) {
		o.MergeMaxGenerations = 4
		o.PendingMax = 0 // never refuse reads: the load measures correctness, not back-pressure
		o.PendingWarn = 0
		o.Budget = store.NewBudget(256 << 20)
	}
	dbs := make([]*store.DB, l.shards)
	stores := make([]*store.Store, l.shards)
	for i := range dbs {
		dbs[i] = mustOpenDB(t, l.url, fmt.Sprintf("load-shard-%d", i), l.inj, tweak)
		s, err := createOrOpen(ctx, dbs[i])
		require.NoError(t, err, "create/open under faults")
		stores[i] = s
	}
	observer := mustStore(t, mustOpenDB(t, l.url, "load-observer", l.inj, tweak))

	const appendersPerShard, keysPerAppender = 2, 40
	owned := make([][]string, l.shards) // keys written by shard i
	l.started = time.Now()
	var wg sync.WaitGroup
	for i := 0; i < l.shards; i++ {
		for a := 0; a < appendersPerShard; a++ {
			ks := make([]string, keysPerAppender)
			for n := range ks {
				ks[n] = fmt.Sprintf("s%d-a%d-%03d", i, a, n)
			}
			owned[i] = append(owned[i], ks...)
			wg.Add(1)
			go func() { defer wg.Done(); l.appender(ctx, stores[i], ks) }()
		}
		wg.Add(2)
		go func() { defer wg.Done(); l.flusher(ctx, stores[i]) }()
		go func() { defer wg.Done(); l.reader(ctx, stores[i], owned[i]) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); l.lister(ctx, observer) }()
	shardIDs := make([]string, l.shards)
	for i, db := range dbs {
		shardIDs[i] = db.Shard()
	}
	for m := 0; m < 2; m++ {
		wg.Add(1)
		go func() { defer wg.Done(); l.merger(ctx, m, stores[m%l.shards], shardIDs) }()
	}
	wg.Wait()
	ran := time.Since(l.started)
	close(l.errs)
	var online []string
	for e := range l.errs {
		online = append(online, e)
	}

	// Quiesce: faults off, seal every shard (a fenced or killed writer is replaced and
	// replays its WAL), write one sentinel generation per shard so that every shard gets a
	// commit whose clean-up runs fault-free, and merge everything.
	l.inj.Enable(false)
	for i, s := range stores {
		require.NoError(t, errOf(s.Flush(ctx)), "final flush of shard %d", i)
		key := fmt.Sprintf("zz-sentinel-%d", i)
		l.oracle.Attempt(key, 1)
		require.NoError(t, errOf(s.Append(ctx, []store.Row{Row(key, 1)})), "sentinel append")
		l.oracle.Ack(key, 1)
		require.NoError(t, errOf(s.Flush(ctx)), "sentinel flush")
	}
	checker := mustStore(t, mustOpenDB(t, l.url, "load-checker", nil, tweak))
	require.NoError(t, errOf(mergeAll(ctx, checker, 20)), "final MergeAll")

	t.Logf("load %s for %s: %s", l.url, ran.Round(time.Millisecond), l.c.String())
	t.Logf("faults: %s", l.inj.Summary())
	tot := l.inj.Total()
	// Over the calls made while faults were on: the calls of the set-up and of the drain after
	// the load (faults off) once diluted the rate below the floor. Half the configured error
	// rate is about four standard deviations below it at this run's ~1,000 active calls.
	assert.GreaterOrEqual(t, float64(tot.Errors)/float64(max(tot.Active, 1)), l.inj.cfg.ErrorRate/2,
		"error rate over %d calls with faults on: the run did not test what it claims", tot.Active)
	assert.True(t, l.c.progressed(), "load made no progress in %s: %s", loadCap*l.dur, l.c.String())
	assert.Empty(t, online, "online checks")

	all, dups, err := ReadAll(ctx, checker, store.SourceAll, 97)
	require.NoError(t, err)
	assert.Empty(t, dups, "keys listed twice or out of order")
	assert.Empty(t, l.oracle.Verify(all), "oracle")
	base, _, err := ReadAll(ctx, checker, store.SourceBase, 500)
	require.NoError(t, err)
	assert.Len(t, base, len(all), "after MergeAll the base against all sources")
	acked, unacked := l.oracle.Counts()
	t.Logf("oracle: %d keys acknowledged, %d attempted only; store holds %d keys", acked, unacked, len(all))

	lay, err := InspectLayout(ctx, dbs[0].Bucket().WithFaults(nil), target)
	require.NoError(t, err)
	t.Logf("layout: %s", lay.Summary())
	assert.Zero(t, lay.Pending(), "pending generations after MergeAll")
	for sh, sl := range lay.Shards {
		assert.Empty(t, sl.UnlistedGens, "shard %s: generation files no manifest lists", sh)
		assert.Empty(t, sl.Listed, "shard %s: manifest still lists generations after MergeAll", sh)
		if len(sl.StaleWAL) > 0 {
			t.Logf("shard %s: %d WAL objects at or below replay_after left (deleted by the next seal)", sh, len(sl.StaleWAL))
		}
	}
	if len(lay.Orphans) > 0 {
		byCause := map[string][]string{}
		for _, o := range lay.Orphans {
			cause := l.attempts.explain(o)
			if i := strings.IndexByte(cause, ' '); i >= 0 && strings.HasPrefix(cause, "merger-") {
				cause = cause[i+1:]
			}
			byCause[cause] = append(byCause[cause], o)
		}
		causes := make([]string, 0, len(byCause))
		for c, fs := range byCause {
			causes = append(causes, fmt.Sprintf("%d× %s (e.g. %s)", len(fs), c, fs[0]))
		}
		sort.Strings(causes)
		t.Errorf("%d staged data files no base manifest references (leaked; see docs/RELIABILITY.md findings):\n  %s",
			len(lay.Orphans), strings.Join(causes, "\n  "))
	}
}

func (l *faultLoad) appender(ctx context.Context, s *store.Store, keys []string) {
	rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
	next := make(map[string]int64, len(keys))
	for l.loading() {
		n := 1 + rng.IntN(4)
		perm := rng.Perm(len(keys))[:n]
		rows := make([]store.Row, n)
		ks := make([]string, n)
		vs := make([]int64, n)
		for i, p := range perm {
			k := keys[p]
			next[k]++
			ks[i], vs[i] = k, next[k]
			rows[i] = Row(k, next[k])
			l.oracle.Attempt(k, next[k])
		}
		_, err := s.Append(ctx, rows)
		if err == nil {
			for i := range ks {
				l.oracle.Ack(ks[i], vs[i])
			}
			l.c.appendOK.Add(1)
			l.c.rowsAcked.Add(int64(n))
		} else {
			l.c.appendFailed.Add(1)
			l.c.rowsUnacked.Add(int64(n))
			switch {
			case errors.Is(err, store.ErrFenced):
				l.c.fencedAppends.Add(1)
			case strings.Contains(err.Error(), "durable but not sealed"):
				l.c.notSealedAppends.Add(1)
			case !errors.Is(err, ErrInjected):
				l.c.otherAppendErrs.Add(1)
				if errors.Is(err, store.ErrInvalidInput) || errors.Is(err, store.ErrCorrupt) {
					l.violation("append: unexpected error class: %v", err)
				}
			}
		}
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Microsecond)
	}
}

func (l *faultLoad) flusher(ctx context.Context, s *store.Store) {
	for l.loading() {
		time.Sleep(time.Duration(20+rand.IntN(40)) * time.Millisecond)
		if _, err := s.Flush(ctx); err != nil {
			l.c.flushFailed.Add(1)
			if errors.Is(err, store.ErrCorrupt) {
				l.violation("flush: %v", err)
			}
		} else {
			l.c.flushOK.Add(1)
		}
	}
}

// reader checks read-your-writes on the writing shard's own handle: a Get never returns
// less than what was acknowledged before it started, nor a value never attempted.
func (l *faultLoad) reader(ctx context.Context, s *store.Store, keys []string) {
	for l.loading() {
		k := keys[rand.IntN(len(keys))]
		lower, had := l.oracle.Acked(k)
		row, err := s.Get(ctx, k)
		switch {
		case err == nil:
			l.c.readOK.Add(1)
			v, verr := ValueOf(row)
			if verr != nil {
				l.violation("get %s: %v", k, verr)
			} else if had && v < lower {
				l.c.readViolations.Add(1)
				l.violation("get %s on its own shard returned %d after %d was acknowledged", k, v, lower)
			}
		case isRowNotFound(err):
			l.c.readMissing.Add(1)
			if had {
				l.c.readViolations.Add(1)
				l.violation("get %s on its own shard: not found after %d was acknowledged", k, lower)
			}
		default:
			l.c.readFailed.Add(1)
			if errors.Is(err, store.ErrCorrupt) {
				l.violation("get %s: %v", k, err)
			}
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
	}
}

// lister pages through the whole store from a handle that never writes, as an HTTP client
// would (a failed page is retried from the same cursor): no key twice, keys in order across
// pages, and (monotonic reads) no key's value ever goes back.
func (l *faultLoad) lister(ctx context.Context, s *store.Store) {
	seen := map[string]int64{}
	for l.loading() {
		got := map[string]bool{}
		after, last, complete := "", "", false
		for tries := 0; tries < 50 && l.loading(); {
			page, err := s.List(ctx, store.ListOptions{Limit: 50, After: after})
			if err != nil {
				l.c.listFailed.Add(1)
				tries++
				continue
			}
			for _, r := range page.Rows {
				k, _ := r["id"].(string)
				v, err := ValueOf(r)
				if err != nil {
					l.violation("list: %v", err)
					continue
				}
				if got[k] || (last != "" && k <= last) {
					l.c.listViolations.Add(1)
					l.violation("list: key %s twice or out of order (after %s)", k, last)
				}
				got[k], last = true, k
				if old, ok := seen[k]; ok && v < old {
					l.c.listViolations.Add(1)
					l.violation("list: key %s went back from %d to %d", k, old, v)
				}
				seen[k] = max(seen[k], v)
			}
			if page.Next == "" {
				complete = true
				break
			}
			after = page.Next
		}
		if complete {
			l.c.listOK.Add(1)
		}
		time.Sleep(30 * time.Millisecond)
	}
}

// merger runs the MergeWal protocol by hand: Repair and Prepare (retried with the same
// attempt key), a CommitRound of the one shard (retried), Abort on a stale shard. It may pick a shard another merger is
// merging too (as a zombie activity would).
func (l *faultLoad) merger(ctx context.Context, id int, s *store.Store, shards []string) {
	for n := 0; l.loading(); n++ {
		shard := shards[rand.IntN(len(shards))]
		attempt := fmt.Sprintf("merger-%d/%d", id, n)
		var p *store.PreparedMerge
		if _, err := retry(2*time.Minute, func() error {
			var err error
			if _, err = s.Repair(ctx, store.RepairParams{Shard: shard}); err == nil {
				p, err = s.Prepare(ctx, store.PrepareParams{Shard: shard, AttemptKey: attempt})
			}
			if err != nil {
				l.c.prepareFailed.Add(1)
				l.attempts.prepareFailed(attempt)
				if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrInvalidInput) {
					l.violation("prepare %s: %v", attempt, err)
				}
			}
			return err
		}); err != nil {
			l.violation("prepare %s never succeeded: %v", attempt, err)
			continue
		}
		if p == nil {
			l.c.prepareEmpty.Add(1)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		l.c.prepareOK.Add(1)
		outcome := ""
		_, err := retry(2*time.Minute, func() error {
			res, err := commitOne(ctx, s, p)
			switch {
			case err == nil && res.Outcome == store.RoundAlreadyCommitted:
				l.c.commitAlready.Add(1)
				outcome = "already-committed"
				return nil
			case err == nil:
				l.c.commitOK.Add(1)
				outcome = "committed"
				return nil
			case errors.Is(err, store.ErrStalePreparation):
				l.c.stale.Add(1)
				outcome = "stale-aborted"
				_, aerr := retry(2*time.Minute, func() error {
					_, err := s.Abort(ctx, p)
					if err != nil {
						l.c.abortRetried.Add(1)
					}
					return err
				})
				if aerr != nil {
					l.violation("abort %s: %v", attempt, aerr)
				} else {
					l.c.abortOK.Add(1)
				}
				return nil
			}
			l.c.commitRetried.Add(1)
			if errors.Is(err, store.ErrCorrupt) || errors.Is(err, store.ErrInvalidInput) {
				l.violation("commit %s: %v", attempt, err)
			}
			return err
		})
		if err != nil {
			l.violation("commit %s never resolved: %v", attempt, err)
		}
		l.attempts.record(p, outcome)
	}
}
