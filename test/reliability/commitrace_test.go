package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

type raceArg struct {
	URL        string `json:"url"`
	Instance   string `json:"instance"`
	Dir        string `json:"dir"` // ready-<instance>, start, prepared-<instance>-<round>, go-<round>, result-<instance>.json
	Rounds     int    `json:"rounds"`
	Rows       int    `json:"rows"`
	MaxGensCap int    `json:"max_gens_cap"`
}

type raceResult struct {
	Shard     string           `json:"shard"`
	Merges    int              `json:"merges"`  // commits that published a version
	Already   int              `json:"already"` // commits answered "already committed" (unexpected here)
	Through   uint64           `json:"through"` // last acknowledged watermark
	Versions  []uint64         `json:"versions"`
	Conflicts int              `json:"conflicts"`  // Commit calls that returned ErrConflict and were retried
	LostRaces int64            `json:"lost_races"` // base put-if-absent calls that found the version taken
	LostBy    []int64          `json:"lost_by"`    // LostRaces per round
	Rows      map[string]int64 `json:"rows"`       // every acknowledged row
	Elapsed   time.Duration    `json:"elapsed"`
}

func init() { childModes["commit-race"] = commitRaceChild }

// commitRaceChild is one shard: rounds of append → seal → prepare → commit to the shared
// base table. Every round's commit waits for the parent's go-<round>, which comes once every
// child has prepared that round (a barrier per round), so the commits of a round race.
func commitRaceChild(ctx context.Context, raw json.RawMessage) error {
	var a raceArg
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	var lost atomic.Int64
	count := objstore.FaultFuncs{AfterFunc: func(op, key string, err error) error {
		if op == objstore.OpPutIfAbsent && strings.Contains(key, "/_versions/") && errors.Is(err, store.ErrAlreadyExists) {
			lost.Add(1)
		}
		return err
	}}
	db, err := openDB(ctx, a.URL, a.Instance, count, nil)
	if err != nil {
		return err
	}
	defer db.Close(ctx)
	var s *store.Store
	if _, err := retry(time.Minute, func() error { s, err = db.Open(ctx, target); return err }); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(a.Dir, "ready-"+a.Instance), nil, 0o644); err != nil {
		return err
	}
	if err := awaitFile(filepath.Join(a.Dir, "start")); err != nil {
		return err
	}
	res := raceResult{Shard: db.Shard(), Rows: map[string]int64{}}
	start := time.Now()
	for r := 0; r < a.Rounds; r++ {
		rows := make([]store.Row, a.Rows)
		for i := range rows {
			k := fmt.Sprintf("%s-r%04d-k%02d", a.Instance, r, i)
			rows[i] = Row(k, int64(r+1))
		}
		if _, err := s.Append(ctx, rows); err != nil {
			return fmt.Errorf("round %d append: %w", r, err)
		}
		for _, row := range rows {
			res.Rows[row.Key] = row.Values[1].(int64)
		}
		if _, err := s.Flush(ctx); err != nil {
			return fmt.Errorf("round %d flush: %w", r, err)
		}
		p, err := s.Prepare(ctx, store.PrepareParams{AttemptKey: fmt.Sprintf("race/%s/%d", a.Instance, r)})
		if err != nil || p == nil {
			return fmt.Errorf("round %d prepare: %v (nil=%v)", r, err, p == nil)
		}
		if err := os.WriteFile(filepath.Join(a.Dir, fmt.Sprintf("prepared-%s-%d", a.Instance, r)), nil, 0o644); err != nil {
			return err
		}
		if err := awaitFile(filepath.Join(a.Dir, fmt.Sprintf("go-%d", r))); err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		lostBefore := lost.Load()
		for {
			cr, err := commitOne(ctx, s, p)
			if errors.Is(err, store.ErrConflict) {
				res.Conflicts++ // 128 lost races in a row: back off and retry, as the activity would
				time.Sleep(10 * time.Millisecond)
				continue
			}
			if err != nil {
				return fmt.Errorf("round %d commit: %w", r, err)
			}
			if cr.Outcome == store.RoundAlreadyCommitted {
				res.Already++
			} else {
				res.Merges++
				res.Versions = append(res.Versions, cr.BaseVersion)
			}
			res.Through = p.Through
			break
		}
		res.LostBy = append(res.LostBy, lost.Load()-lostBefore)
	}
	res.Elapsed = time.Since(start)
	res.LostRaces = lost.Load()
	return WriteJSONFile(filepath.Join(a.Dir, "result-"+a.Instance+".json"), res)
}

// awaitFile waits until path exists (the parent's barrier), polling every millisecond.
func awaitFile(path string) error {
	for deadline := time.Now().Add(5 * time.Minute); ; {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("never released: %s", filepath.Base(path))
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCommitRaceProcesses: ≥ 8 OS processes, one shard each, commit merges to ONE base
// table, all of a round's commits released at once. No commit may be lost or doubled: every acknowledged commit
// published a distinct version, the versions are exactly 1..total, each shard's watermark
// equals the last generation its process acknowledged, and every row is in the base once.
func TestCommitRaceProcesses(t *testing.T) {
	procs := pickInt(8, 12, "WALKEEPER_RACE_PROCS")
	rounds := pickInt(25, 200, "WALKEEPER_RACE_ROUNDS")
	if raceEnabled && !soak() {
		rounds = 10 // fewer rounds, each still contended by every process
	}
	t.Run("file", func(t *testing.T) {
		runCommitRace(t, fileURL(t), nil, procs, rounds)
	})
	t.Run("s3", func(t *testing.T) {
		runCommitRace(t, s3test.Start(t), s3test.Env(), procs, max(rounds/2, 4))
	})
}

func runCommitRace(t *testing.T, url string, env map[string]string, procs, rounds int) {
	ctx := context.Background()
	parent := mustOpenDB(t, url, "race-parent", nil, nil)
	mustStore(t, parent)
	dir := t.TempDir()
	children := make([]*Child, procs)
	for i := range children {
		c, err := StartChild(ctx, "commit-race", raceArg{
			URL: url, Instance: fmt.Sprintf("racer-%02d", i), Dir: dir, Rounds: rounds, Rows: 3,
		}, env)
		require.NoError(t, err)
		children[i] = c
	}
	// Start them together: wait until every child has opened the store.
	require.Eventually(t, func() bool {
		for i := range children {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("ready-racer-%02d", i))); err != nil {
				return false
			}
		}
		return true
	}, 3*time.Minute, 5*time.Millisecond, "not every child got ready")
	began := time.Now()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "start"), nil, 0o644))
	// The barrier of every round: release its commits once every child has prepared it.
	for r := 0; r < rounds; r++ {
		for i := range children {
			require.NoError(t, awaitFile(filepath.Join(dir, fmt.Sprintf("prepared-racer-%02d-%d", i, r))), "child %d, round %d", i, r)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("go-%d", r)), nil, 0o644))
	}
	results := make([]raceResult, procs)
	for i, c := range children {
		res, err := c.Wait()
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("child %d failed: %v\n%s", i, err, res)
		}
		require.NoError(t, ReadJSONFile(filepath.Join(dir, fmt.Sprintf("result-racer-%02d.json", i)), &results[i]), "child %d result", i)
	}
	elapsed := time.Since(began)

	total, conflicts, lost := 0, 0, int64(0)
	seen := map[uint64]string{}
	want := map[string]int64{}
	lostIn := make([]int64, rounds)
	for _, r := range results {
		for i, n := range r.LostBy {
			lostIn[i] += n
		}
		total += r.Merges
		conflicts += r.Conflicts
		lost += r.LostRaces
		assert.Zero(t, r.Already, "shard %s: commits answered 'already committed' though nobody else merges its shard", r.Shard)
		for _, v := range r.Versions {
			if other, dup := seen[v]; dup {
				t.Errorf("base version %d acknowledged to two commits (%s and %s)", v, other, r.Shard)
			}
			seen[v] = r.Shard
		}
		for k, v := range r.Rows {
			want[k] = v
		}
	}
	oneToN := make([]uint64, len(seen))
	for i := range oneToN {
		oneToN[i] = uint64(i + 1)
	}
	assert.Equal(t, oneToN, slices.Sorted(maps.Keys(seen)), "acknowledged versions are not 1..%d", total)
	lay, err := InspectLayout(ctx, parent.Bucket(), target)
	require.NoError(t, err)
	assert.Equal(t, uint64(total), lay.BaseVersion, "base version against merges acknowledged: a commit was lost or invented")
	for _, r := range results {
		assert.Equal(t, r.Through, lay.Watermarks[r.Shard], "shard %s: watermark against acknowledged through", r.Shard)
	}
	assert.Empty(t, lay.Orphans, "staged files outside the base")
	reader := mustStore(t, mustOpenDB(t, url, "race-reader", nil, nil))
	base, dups, err := ReadAll(ctx, reader, store.SourceBase, 1000)
	require.NoError(t, err)
	assert.Empty(t, dups, "keys twice in the base")
	assert.Equal(t, want, base, "the base against every acknowledged row")
	t.Logf("%d processes × %d rounds: %d commits in %s (%.1f commits/s), %d lost put-if-absent races rebased (per round %v), %d ErrConflict retries; %s",
		procs, rounds, total, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), lost, lostIn, conflicts, lay.Summary())
	// The race happened: with every round's commits released at once, committers lose the
	// put-if-absent of v+1 and rebase. Fewer lost races than rounds means the processes
	// mostly took turns, and the checks above proved nothing about racing committers.
	assert.Equal(t, procs*rounds, total, "commits of %d processes × %d rounds", procs, rounds)
	if lost < int64(rounds) {
		t.Errorf("%d lost put-if-absent races in %d rounds of %d racing committers (per round %v): the commits did not race", lost, rounds, procs, lostIn)
	}
}
