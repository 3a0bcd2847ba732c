package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	tworker "go.temporal.io/sdk/worker"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// gauge counts calls in flight and remembers the maximum.
type gauge struct {
	now, max atomic.Int64
	total    atomic.Int64
}

func (g *gauge) enter() {
	n := g.now.Add(1)
	g.total.Add(1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.now.Add(-1) }

func (g *gauge) reset() {
	g.max.Store(0)
	g.total.Store(0)
}

// countingActivities wraps the real Prepare and CommitRound of every worker of the
// test with one shared pair of gauges: the process-wide number of Prepare and CommitRound
// executions in flight around the real store call. Each call also lingers a little so that two executions that
// could overlap would.
type countingActivities struct {
	prepares, commits gauge
	linger            time.Duration

	mu       sync.Mutex
	versions []uint64 // base version of every successful commit
	// commitIDs are the commit activities that ran: a retry (its answer lost on a loaded
	// server, the round found already committed) is the same commit again.
	commitIDs map[string]bool
}

func (c *countingActivities) register(r tworker.ActivityRegistry, a *activities.Activities) {
	activities.Register(r, a) // every activity, then override two names
	r.RegisterActivityWithOptions(func(ctx context.Context, p contract.PrepareParams) (contract.PrepareResult, error) {
		c.prepares.enter()
		defer c.prepares.leave()
		time.Sleep(c.linger)
		return a.Prepare(ctx, p)
	}, activity.RegisterOptions{Name: contract.PrepareActivity, DisableAlreadyRegisteredCheck: true})
	r.RegisterActivityWithOptions(commitCounted(c, a.CommitRound, func(res contract.CommitRoundResult) (uint64, bool) {
		for _, sr := range res.Shards {
			if sr.Outcome == contract.RoundCommitted {
				return res.BaseVersion, true // one base version per round, however many shards it covers
			}
		}
		return 0, false
	}), activity.RegisterOptions{Name: contract.CommitRoundActivity, DisableAlreadyRegisteredCheck: true})
}

// commitCounted wraps one commit activity: counted in flight, lingering around the real call,
// and recording the base version it published (published reports it; false = none).
func commitCounted[P, R any](c *countingActivities, commit func(context.Context, P) (R, error), published func(R) (uint64, bool)) func(context.Context, P) (R, error) {
	return func(ctx context.Context, p P) (R, error) {
		c.mu.Lock()
		c.commitIDs[activity.GetInfo(ctx).ActivityID] = true
		c.mu.Unlock()
		c.commits.enter()
		defer c.commits.leave()
		time.Sleep(c.linger)
		res, err := commit(ctx, p)
		time.Sleep(c.linger)
		if v, ok := published(res); err == nil && ok {
			c.mu.Lock()
			c.versions = append(c.versions, v)
			c.mu.Unlock()
		}
		return res, err
	}
}

// At most one commit in flight per table: four writer shards each with pending
// generations, one MergeWal, one generation per pass (so 12 commits per merge), with the
// Prepare and CommitRound activities of every worker wrapped by one shared in-flight counter.
// Serially, with ParallelPrepare (where the prepares must be seen overlapping, or the test
// proves nothing) and with round commits (where some round must cover two shards), the
// counter never exceeds one, and every commit publishes the next base version.
func TestOneCommitInFlightPerTable(t *testing.T) {
	e := newEnv(t)
	const target = "generic:commits"
	const shards, gens, rowsPerGen = 4, 3, 10

	var writers []*store.DB
	var stores []*store.Store
	for i := range shards {
		db := e.openDB(fmt.Sprintf("writer-%d", i), nil)
		writers = append(writers, db)
		stores = append(stores, e.createStore(db, target))
	}
	counting := &countingActivities{linger: 150 * time.Millisecond, commitIDs: map[string]bool{}}
	e.startHarness(harnessOptions{
		Shared:   e.openDB("shared", nil),
		Shards:   writers,
		Register: counting.register,
	})

	written := 0
	for _, mode := range []struct {
		name     string
		parallel bool
		// round: several shards in one CommitRound and one base version; otherwise
		// MaxShardsPerCommit 1, one shard per round, one base version per pass.
		round bool
	}{{"serial", false, false}, {"parallel-prepare", true, false}, {"round-commit", true, true}} {
		for i, s := range stores {
			e.writeGenerations(s, fmt.Sprintf("%s-%d-", mode.name, i), gens, rowsPerGen)
		}
		written += shards * gens * rowsPerGen
		before := e.stats(writers[0], target)
		counting.prepares.reset()
		counting.commits.reset()
		counting.mu.Lock()
		counting.versions = nil
		counting.commitIDs = map[string]bool{}
		counting.mu.Unlock()

		perCommit := 1
		if mode.round {
			perCommit = 0 // the default: up to contract.MaxRoundShards per CommitRound
		}
		run := e.startMerge(target, contract.MergeWalInput{
			MaxGenerations:     ptr(1),
			ParallelPrepare:    mode.parallel,
			MaxShardsPerCommit: perCommit,
		})
		res := e.mergeResult(run, waitLong)

		if res.Reclaimed != shards*gens || res.Passes != shards*gens {
			t.Fatalf("%s: result %+v, want %d generations reclaimed in %d passes", mode.name, res, shards*gens, shards*gens)
		}
		counting.mu.Lock()
		commits := int64(len(counting.commitIDs))
		counting.mu.Unlock()
		if executed := counting.commits.total.Load(); executed != commits {
			t.Logf("%s: %d commit executions for %d commits: Temporal retried some", mode.name, executed, commits)
		}
		switch {
		case !mode.round && commits != shards*gens:
			t.Errorf("%s: %d commits executed, want %d", mode.name, commits, shards*gens)
		case mode.round && (commits < gens || commits > shards*gens):
			t.Errorf("%s: %d round commits executed, want %d..%d", mode.name, commits, gens, shards*gens)
		}
		if m := counting.commits.max.Load(); m != 1 {
			t.Errorf("%s: %d commits of one table were in flight at once, want at most 1", mode.name, m)
		}
		maxPrep := counting.prepares.max.Load()
		switch {
		case !mode.parallel && maxPrep != 1:
			t.Errorf("serial: %d prepares in flight at once, want 1", maxPrep)
		case mode.parallel && maxPrep < 2:
			t.Errorf("parallel-prepare: prepares never overlapped (max in flight %d): the commit check proves nothing", maxPrep)
		}
		t.Logf("%s: %d commits, max in flight %d; %d prepares, max in flight %d",
			mode.name, counting.commits.total.Load(), counting.commits.max.Load(), counting.prepares.total.Load(), maxPrep)

		// Each commit published exactly the next base version.
		counting.mu.Lock()
		vs := append([]uint64(nil), counting.versions...)
		counting.mu.Unlock()
		sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
		for i, v := range vs {
			if want := before.BaseVersion + uint64(i) + 1; v != want {
				t.Errorf("%s: commit base versions %v, want consecutive from %d", mode.name, vs, before.BaseVersion+1)
				break
			}
		}
		after := e.stats(writers[0], target)
		// One base version per commit: shards*gens of them for one-shard commits, one per
		// round for round commits.
		counting.mu.Lock()
		published := len(counting.versions)
		counting.mu.Unlock()
		if !mode.round && published != shards*gens {
			t.Errorf("%s: %d commits published a version, want %d", mode.name, published, shards*gens)
		}
		if after.TotalPending() != 0 || after.Rows != int64(written) || after.BaseVersion != before.BaseVersion+uint64(published) {
			t.Fatalf("%s: after merge pending %d rows %d version %d; want 0, %d, %d", mode.name,
				after.TotalPending(), after.Rows, after.BaseVersion, written, before.BaseVersion+uint64(published))
		}
		if mode.round && published >= shards*gens {
			t.Errorf("%s: %d versions for %d passes: no round covered two shards", mode.name, published, shards*gens)
		}
	}
}
