package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
)

type crashArg struct {
	URL      string `json:"url"`
	Instance string `json:"instance"`
	Step     string `json:"step"`
	Iter     int    `json:"iter"`
	Dir      string `json:"dir"`
	Keys     int    `json:"keys"`
	Batches  int    `json:"batches"`
	Flushed  int    `json:"flushed"` // the first Flushed batches are each sealed into a generation
	PerBatch int    `json:"per_batch"`
	// Restart only.
	Mode  string `json:"mode"`  // "retry": retry the dead attempt's commit; "abort": abort it first
	Order string `json:"order"` // "prepare-first" or "recover-first" (when no preparation survived)
}

// open opens the child's DB (with faults, nil = none) and the reliability store in it.
func (a crashArg) open(ctx context.Context, faults objstore.Faults) (*store.DB, *store.Store, error) {
	db, err := openDB(ctx, a.URL, a.Instance, faults, nil)
	if err != nil {
		return nil, nil, err
	}
	s, err := db.Open(ctx, target)
	if err != nil {
		return nil, nil, err
	}
	return db, s, nil
}

type crashRestartResult struct {
	PreparedFound bool   `json:"prepared_found"`
	Outcome       string `json:"outcome"`
	Recovered     int    `json:"recovered"`
	Reclaimed     int    `json:"reclaimed"`
}

func (a crashArg) attemptKey() string {
	return fmt.Sprintf("merge-wal/generic/rel/crash-%s-%d", a.Step, a.Iter)
}
func (a crashArg) preparedPath() string {
	return filepath.Join(a.Dir, fmt.Sprintf("prepared-%d.json", a.Iter))
}
func (a crashArg) ackLog() string { return filepath.Join(a.Dir, "acks.log") }

func init() {
	childModes["crash"] = crashChild
	childModes["crash-restart"] = crashRestartChild
}

// crashChild appends (every append logged before and after), seals some of it, then runs
// one merge with the step hook armed: the hook SIGKILLs the process at the step. Returning
// means the step was never reached, which fails the iteration.
func crashChild(ctx context.Context, raw json.RawMessage) error {
	var a crashArg
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	step, ok := StepByName(a.Step)
	if !ok {
		return fmt.Errorf("unknown step %q", a.Step)
	}
	hook := &StepHook{Step: step, Hit: func(Step) { KillSelf() }}
	_, s, err := a.open(ctx, hook)
	if err != nil {
		return err
	}
	log, err := OpenAckLog(a.ackLog())
	if err != nil {
		return err
	}
	defer log.Close()
	hook.Arm(step.Phase == "append")
	for b := 0; b < a.Batches; b++ {
		keys := make([]string, a.PerBatch)
		vals := make([]int64, a.PerBatch)
		rows := make([]store.Row, a.PerBatch)
		for j := range rows {
			keys[j] = fmt.Sprintf("k%03d", (b*7+j)%a.Keys)
			vals[j] = int64(a.Iter*1000 + b + 1)
			rows[j] = Row(keys[j], vals[j])
		}
		if err := log.Attempt(keys, vals); err != nil {
			return err
		}
		if _, err := s.Append(ctx, rows); err != nil {
			return fmt.Errorf("append: %w", err)
		}
		if err := log.Ack(keys, vals); err != nil {
			return err
		}
		if b < a.Flushed {
			if _, err := s.Flush(ctx); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
		}
	}
	hook.Arm(true)
	p, err := s.Prepare(ctx, store.PrepareParams{AttemptKey: a.attemptKey()})
	if err != nil || p == nil {
		return fmt.Errorf("prepare: %v (nil=%v)", err, p == nil)
	}
	// What a Temporal activity result would carry to the next activity.
	if err := WriteJSONFile(a.preparedPath(), p); err != nil {
		return err
	}
	if _, err := commitOne(ctx, s, p); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return fmt.Errorf("step %s was never reached (hook hits %d)", a.Step, hook.Hits())
}

// crashRestartChild is the restarted process (same instance, same shard). It finishes or
// aborts the dead attempt the way MergeWal would, recovers the unsealed WAL and merges
// everything.
func crashRestartChild(ctx context.Context, raw json.RawMessage) error {
	var a crashArg
	if err := json.Unmarshal(raw, &a); err != nil {
		return err
	}
	db, s, err := a.open(ctx, nil)
	if err != nil {
		return err
	}
	var res crashRestartResult
	recoverWAL := func() error {
		n, err := db.Recover(ctx)
		res.Recovered += n
		return err
	}
	commit := func(p *store.PreparedMerge) error {
		cr, err := commitOne(ctx, s, p)
		switch {
		case errors.Is(err, store.ErrStalePreparation):
			res.Outcome += " commit:stale"
			_, err = s.Abort(ctx, p)
			return err
		case err != nil:
			return fmt.Errorf("commit: %w", err)
		case cr.Outcome == store.RoundAlreadyCommitted:
			res.Outcome += " commit:already"
		default:
			res.Outcome += " commit:published"
		}
		return nil
	}
	var p store.PreparedMerge
	switch err := ReadJSONFile(a.preparedPath(), &p); {
	case err == nil:
		res.PreparedFound = true
		if a.Mode == "abort" {
			ar, err := s.Abort(ctx, &p)
			switch {
			case errors.Is(err, store.ErrConflict):
				// A commit claim exists below the watermark: the commit may still publish,
				// so the protocol says finish it.
				res.Outcome += " abort:refused"
				if err := commit(&p); err != nil {
					return err
				}
			case err != nil:
				return fmt.Errorf("abort: %w", err)
			default:
				res.Outcome += fmt.Sprintf(" abort:deleted=%d,present=%v", ar.Deleted, ar.CommitPresent)
			}
		} else if err := commit(&p); err != nil {
			return err
		}
	case errors.Is(err, os.ErrNotExist):
		// Killed inside Prepare: the activity is retried with the same attempt key.
		if a.Order == "recover-first" {
			if err := recoverWAL(); err != nil {
				return err
			}
		}
		if _, err := s.Repair(ctx, store.RepairParams{}); err != nil {
			return fmt.Errorf("repair before the retried prepare: %w", err)
		}
		p2, err := s.Prepare(ctx, store.PrepareParams{AttemptKey: a.attemptKey()})
		if err != nil {
			return fmt.Errorf("retried prepare: %w", err)
		}
		res.Outcome += " reprepared"
		if p2 != nil {
			if err := commit(p2); err != nil {
				return err
			}
		}
	default:
		return err
	}
	if err := recoverWAL(); err != nil {
		return err
	}
	if res.Reclaimed, err = mergeAll(ctx, s, 10); err != nil {
		return err
	}
	if err := db.Close(ctx); err != nil {
		return err
	}
	return WriteJSONFile(filepath.Join(a.Dir, fmt.Sprintf("restart-%d.json", a.Iter)), res)
}

// TestCrashMatrix: for every step of the crash table (docs/FORMAT.md §6), a child process
// appends (acknowledged appends logged), seals four of six batches, and merges, with a hook
// that SIGKILLs it at the step (three write-path steps, eight merge steps). A restarted process (same instance) finishes or aborts
// the dead attempt as MergeWal would — retrying the commit, or Abort (refused while a commit
// claim may still publish); retrying a prepare with the same attempt key, before or after the
// WAL recovery — then recovers the WAL tail and merges everything. The oracle then checks
// every acknowledged row, exactly once, with its newest value; pending is 0; no generation
// file is left; staged files outside the base are counted per step.
func TestCrashMatrix(t *testing.T) {
	iters := pickInt(2, 20, "WALKEEPER_CRASH_ITERS")
	for _, step := range MergeSteps {
		t.Run(step.Name, func(t *testing.T) {
			runCrashStep(t, step, iters)
		})
	}
}

func runCrashStep(t *testing.T, step Step, iters int) {
	ctx := context.Background()
	url := fileURL(t)
	dir := t.TempDir()
	parent := mustOpenDB(t, url, "crash-parent", nil, nil)
	mustStore(t, parent)
	prevOrphans := 0
	leaked := 0
	outcomes := map[string]int{}
	for it := 0; it < iters; it++ {
		a := crashArg{URL: url, Instance: "crash-w1", Step: step.Name, Iter: it, Dir: dir, Keys: 24, Batches: 6, Flushed: 4, PerBatch: 5}
		res, err := RunChild(ctx, "crash", a, nil)
		require.NoError(t, err)
		if !res.Killed {
			t.Fatalf("iteration %d: the child was not killed at %s:\n%s", it, step.Name, res)
		}
		if it%2 == 1 {
			a.Mode, a.Order = "abort", "recover-first"
		} else {
			a.Mode, a.Order = "retry", "prepare-first"
		}
		res, err = RunChild(ctx, "crash-restart", a, nil)
		require.NoError(t, err)
		if res.ExitCode != 0 || res.Killed {
			t.Fatalf("iteration %d: restart failed:\n%s", it, res)
		}
		var rr crashRestartResult
		require.NoError(t, ReadJSONFile(filepath.Join(dir, fmt.Sprintf("restart-%d.json", it)), &rr))
		outcomes[fmt.Sprintf("%s/%s:%s", a.Mode, a.Order, strings.TrimSpace(rr.Outcome))]++

		oracle := NewOracle()
		require.NoError(t, oracle.LoadAckLog(a.ackLog()))
		checkDB, checker, all := readChecked(t, url, fmt.Sprintf("crash-checker-%d", it), target, oracle, fmt.Sprintf("iteration %d", it))
		base, _, err := ReadAll(ctx, checker, store.SourceBase, 1000)
		require.NoError(t, err)
		assert.Equal(t, all, base, "iteration %d: base differs from all sources after the merge", it)
		lay, err := InspectLayout(ctx, parent.Bucket(), target)
		require.NoError(t, err)
		assert.Zero(t, lay.Pending(), "iteration %d: generations pending", it)
		for sh, sl := range lay.Shards {
			assert.Empty(t, sl.GenFiles, "iteration %d: shard %s: generation files left (listed %v)", it, sh, sl.Listed)
		}
		// The crash table promises that a retried prepare drops its own staged files, also
		// after a kill right after staging (TestFindingRetriedPrepareDoesNotLeakStagedFile),
		// so no step may leak one.
		if newOrphans := len(lay.Orphans) - prevOrphans; newOrphans > 0 {
			leaked += newOrphans
			t.Errorf("iteration %d (%s/%s, %s): %d staged files leaked at step %s, outside the base: %v",
				it, a.Mode, a.Order, strings.TrimSpace(rr.Outcome), newOrphans, step.Name, lay.Orphans)
		}
		prevOrphans = len(lay.Orphans)
		if it == iters-1 {
			t.Logf("%s: %d iterations, outcomes %v, leaked staged files %d, final layout: %s", step.Name, iters, outcomes, leaked, lay.Summary())
		}
		_ = checkDB.Close(ctx)
	}
}

// AckLog is an append-only file of "attempt|ack key value" lines that a child process writes
// around every append, so a parent can rebuild the oracle after killing the child. A single
// write(2) per line on an O_APPEND file survives the death of the writing process (it is in
// the page cache), so no fsync is needed for process kills.
type AckLog struct {
	mu sync.Mutex
	f  *os.File
}

// OpenAckLog opens (creating) the log for appending.
func OpenAckLog(path string) (*AckLog, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &AckLog{f: f}, nil
}

func (l *AckLog) write(kind string, keys []string, values []int64) error {
	var b strings.Builder
	for i, k := range keys {
		fmt.Fprintf(&b, "%s %s %d\n", kind, k, values[i])
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.f.WriteString(b.String())
	return err
}

// Attempt logs values about to be appended.
func (l *AckLog) Attempt(keys []string, values []int64) error {
	return l.write("attempt", keys, values)
}

// Ack logs acknowledged values.
func (l *AckLog) Ack(keys []string, values []int64) error { return l.write("ack", keys, values) }

// Close closes the file.
func (l *AckLog) Close() error { return l.f.Close() }

// LoadAckLog replays a log into o. A torn last line (the writer died mid-write) is ignored.
func (o *Oracle) LoadAckLog(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Fields(sc.Text())
		if len(parts) != 3 {
			continue
		}
		v, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			continue
		}
		switch parts[0] {
		case "attempt":
			o.mu.Lock()
			st := o.state(parts[1])
			if v > st.maxTry {
				st.maxTry = v
				st.maybe = append(st.maybe, v)
			}
			o.mu.Unlock()
		case "ack":
			o.Ack(parts[1], v)
		}
	}
	return sc.Err()
}
