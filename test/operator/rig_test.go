package operator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/actioncount"
	"github.com/walkeeper/walkeeper/internal/testkit/apitest"
	"github.com/walkeeper/walkeeper/internal/testkit/s3test"
	"github.com/walkeeper/walkeeper/internal/testkit/walkeeperproc"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/store/objstore"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/test/reliability"
)

// Generous bounds for a loaded 2-core machine (other suites beside this one took a merge
// from seconds to minutes); none is a performance assertion.
const (
	waitShort = 2 * time.Minute
	waitLong  = 6 * time.Minute
)

// rig is what every case shares: the S3 server behind its gate, two worker processes on it
// (two shards per store), the Temporal namespace, an SDK client and the CLI.
type rig struct {
	ns, hostPort, cli, storage string
	gate                       *s3test.Gate
	c                          client.Client
	workers                    []*walkeeperproc.Worker
}

func startRig(t *testing.T) *rig {
	t.Helper()
	ns := suite.Namespace(t)
	bin, err := suite.WalkeeperBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The worker processes and this process's reader sign with the test credentials.
	for k, v := range s3test.Env() {
		os.Setenv(k, v)
	}
	r := &rig{ns: ns, hostPort: suite.HostPort(), cli: suite.CLIPath()}
	bucket := s3test.NewBucketName()
	srv, err := s3test.New(s3test.Options{Buckets: []string{bucket}, Wrap: func(h http.Handler) http.Handler {
		r.gate = s3test.NewGate(h)
		return r.gate
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.gate.ReleaseAll(); _ = srv.Close() })
	r.storage = srv.BucketURL(bucket)

	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	c, err := temporaladmin.Dial(ctx, temporaladmin.Config{HostPort: r.hostPort, Namespace: ns}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	r.c = c

	args := []string{"--storage", r.storage, "--temporal", r.hostPort, "--namespace", ns,
		"--flush-interval", "0", "--merge-after-generations", "0", "--sweep-interval", "0",
		"--reconcile-interval", "0", "--merge-max-generations", "1", "--fairness-probe=false",
		// Every case holds an activity at some point: enough slots that held ones never
		// starve the other cases.
		"--merge-slots", "32", "--shared-activity-slots", "64",
		// A held Prepare keeps its memory reservation: no budget, so it blocks no other case.
		"--merge-budget-bytes", "0",
		"--log-format", "json", "--log-level", "info", "--temporal-wait", "2m"}
	for i := range 2 {
		name := fmt.Sprintf("op-w%d", i)
		w := &walkeeperproc.Worker{Bin: bin, Instance: name,
			Log: suite.LogPath(name), Args: args}
		w.Start(t)
		suite.KeepLogsIfFailed(t, w.Log)
		r.workers = append(r.workers, w)
	}
	t.Cleanup(func() {
		r.gate.ReleaseAll()
		var wg sync.WaitGroup
		for _, w := range r.workers {
			wg.Add(1)
			go func() { defer wg.Done(); _, _ = w.Stop(30 * time.Second) }()
		}
		wg.Wait()
	})
	return r
}

// opCase is one case: its own store, its oracle, and the workflow runs it saw.
type opCase struct {
	t      *testing.T
	r      *rig
	tg     store.Target
	oracle *reliability.Oracle
	next   map[string]int64
	runs   map[string]bool // run IDs of the case's workflows seen so far (history checks)
	ids    map[string]bool // workflow IDs whose every run is checked
}

var caseSeq struct {
	sync.Mutex
	n int
}

func (r *rig) newCase(t *testing.T) *opCase {
	t.Helper()
	caseSeq.Lock()
	caseSeq.n++
	name := fmt.Sprintf("op%02d", caseSeq.n)
	caseSeq.Unlock()
	c := &opCase{t: t, r: r, tg: store.Target{Kind: store.KindGeneric, Name: name}, oracle: reliability.NewOracle(),
		next: map[string]int64{}, runs: map[string]bool{}, ids: map[string]bool{}}
	c.ids[contract.MergeWalID(c.tg)] = true
	c.must(0, http.MethodPost, c.api(0, ""), map[string]any{"fields": reliability.Schema.Fields}, nil)
	t.Logf("store %s", c.tg)
	return c
}

func (c *opCase) api(worker int, rest string) string {
	return "http://" + c.r.workers[worker].Listen + "/api/v1/stores/" + c.tg.Path() + rest
}

// call sends body as JSON and decodes the answer into out; it returns the status.
func (c *opCase) call(method, url string, body, out any) (int, string) {
	c.t.Helper()
	st, raw, err := callErr(method, url, body)
	if err != nil {
		c.t.Fatal(err)
	}
	if out != nil && st < 300 {
		if err := json.Unmarshal([]byte(raw), out); err != nil {
			c.t.Fatalf("%s %s: %v: %s", method, url, err, raw)
		}
	}
	return st, raw
}

// callErr is call for goroutines other than the test's: it fails nothing.
func callErr(method, url string, body any) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	res, err := apitest.Do(ctx, apitest.JSON(method, url, body))
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: %w", method, url, err)
	}
	return res.Status, string(res.Body), nil
}

// must is call that fails the case unless the status is want (0: any 2xx).
func (c *opCase) must(want int, method, url string, body, out any) {
	c.t.Helper()
	if st, raw := c.call(method, url, body, out); st != want && (want != 0 || st < 200 || st > 299) {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, url, st, want, raw)
	}
}

// seal writes gens generations on each worker (two shards), 12 rows each, some keys
// rewritten, every acknowledged value recorded in the oracle.
func (c *opCase) seal(gens int) {
	c.t.Helper()
	for g := 0; g < gens; g++ {
		for wi := range c.r.workers {
			rows := make([]map[string]any, 12)
			keys := make([]string, len(rows))
			vals := make([]int64, len(rows))
			for j := range rows {
				k := fmt.Sprintf("w%d-%03d", wi, (len(c.next)*7+j*5)%40)
				c.next[k]++
				keys[j], vals[j] = k, c.next[k]
				c.oracle.Attempt(k, vals[j])
				rows[j] = map[string]any{"id": k, "v": vals[j], "pad": "x"}
			}
			c.must(0, http.MethodPost, c.api(wi, "/rows"), rows, nil)
			for j := range keys {
				c.oracle.Ack(keys[j], vals[j])
			}
			c.must(0, http.MethodPost, c.api(wi, "/flush"), nil, nil)
		}
	}
}

// startMerge starts MergeWal through the HTTP route without waiting; it returns the run ID.
func (c *opCase) startMerge() string {
	c.t.Helper()
	var out struct {
		RunID string `json:"run_id"`
	}
	c.must(http.StatusAccepted, http.MethodPost, c.api(1, "/merge-wal"), nil, &out)
	c.runs[out.RunID] = true
	return out.RunID
}

// mergeWait runs the HTTP route with wait=true and returns its status and body.
func (c *opCase) mergeWait() (int, string) {
	c.t.Helper()
	return c.call(http.MethodPost, c.api(1, "/merge-wal?wait=true"), nil, nil)
}

// temporal runs the Temporal CLI against the rig's namespace and returns its output.
func (c *opCase) temporal(args ...string) string {
	c.t.Helper()
	out, err := c.temporalErr(args...)
	// "Workflow is busy" is Temporal's transient answer to a burst of requests on one run
	// (an operator retries it too).
	for try := 1; err != nil && strings.Contains(out, "Workflow is busy") && try < 50; try++ {
		time.Sleep(time.Duration(try) * 20 * time.Millisecond)
		out, err = c.temporalErr(args...)
	}
	if err != nil {
		c.t.Fatalf("temporal %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c *opCase) temporalErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	args = append(args, "--address", c.r.hostPort, "--namespace", c.r.ns)
	b, err := exec.CommandContext(ctx, c.r.cli, args...).CombinedOutput()
	return string(b), err
}

// describe is the run's description ("" = the latest run).
func (c *opCase) describe(id, runID string) *workflowservice.DescribeWorkflowExecutionResponse {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	d, err := c.r.c.DescribeWorkflowExecution(ctx, id, runID)
	if err != nil {
		c.t.Fatalf("describe %s/%s: %v", id, runID, err)
	}
	return d
}

// latestRun is the run ID of id's latest run.
func (c *opCase) latestRun(id string) string {
	c.t.Helper()
	rid := c.describe(id, "").GetWorkflowExecutionInfo().GetExecution().GetRunId()
	c.runs[rid] = true
	return rid
}

// waitClosed waits for the run to close and returns its status.
func (c *opCase) waitClosed(id, runID string) enumspb.WorkflowExecutionStatus {
	c.t.Helper()
	deadline := time.Now().Add(waitLong)
	for polls := 1; ; polls++ {
		st := c.describe(id, runID).GetWorkflowExecutionInfo().GetStatus()
		if st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return st
		}
		// A run wedged by non-determinism stays running for ever: say so at once.
		if polls%20 == 0 {
			if msg := nonDeterminism(c.history(id, runID)); msg != "" {
				c.t.Fatalf("%s/%s is wedged: %s", id, runID, msg)
			}
		}
		if time.Now().After(deadline) {
			var pending strings.Builder
			for _, pa := range c.describe(id, runID).GetPendingActivities() {
				fmt.Fprintf(&pending, "  %s %s state=%s attempt=%d last failure: %s\n", pa.GetActivityType().GetName(),
					pa.GetActivityId(), pa.GetState(), pa.GetAttempt(), pa.GetLastFailure().GetMessage())
			}
			c.t.Fatalf("%s/%s still running after %s; pending activities:\n%s\nhistory:\n%s", id, runID, waitLong,
				pending.String(), c.historyText(id, runID))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitCompleted waits for the run and fails the case unless it completed.
func (c *opCase) waitCompleted(id, runID string) {
	c.t.Helper()
	if st := c.waitClosed(id, runID); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		c.t.Fatalf("%s/%s ended %s, want completed:\n%s", id, runID, st, c.historyText(id, runID))
	}
}

// held waits until the gate holds h's request.
func (c *opCase) held(h *s3test.Hold, what string) {
	c.t.Helper()
	select {
	case <-h.Hit():
	case <-time.After(waitLong):
		c.t.Fatalf("timed out after %s waiting for %s", waitLong, what)
	}
}

func (c *opCase) history(id, runID string) []*historypb.HistoryEvent {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	evs, err := actioncount.History(ctx, c.r.c, id, runID)
	if err != nil {
		c.t.Fatalf("history of %s/%s: %v", id, runID, err)
	}
	return evs
}

func (c *opCase) historyText(id, runID string) string {
	var b strings.Builder
	for _, ev := range c.history(id, runID) {
		fmt.Fprintf(&b, "  %3d %s", ev.GetEventId(), ev.GetEventType())
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			fmt.Fprintf(&b, " %s %s", a.GetActivityType().GetName(), a.GetActivityId())
		}
		if f := ev.GetWorkflowTaskFailedEventAttributes(); f != nil {
			fmt.Fprintf(&b, " %s: %s", f.GetCause(), f.GetFailure().GetMessage())
		}
		if f := ev.GetActivityTaskFailedEventAttributes(); f != nil {
			fmt.Fprintf(&b, " %s", f.GetFailure().GetMessage())
		}
		b.WriteString("\n")
	}
	return b.String()
}

// eventAfter is the ID of the first WorkflowTaskCompleted event after the nth (1-based)
// completion of activity typ in the run's history: a reset point "after typ completed".
func (c *opCase) eventAfter(id, runID, typ string, nth int) int64 {
	c.t.Helper()
	evs := c.history(id, runID)
	scheduled := map[int64]string{}
	seen := 0
	for _, ev := range evs {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] == typ {
			seen++
		}
		if seen >= nth && ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
			return ev.GetEventId()
		}
	}
	c.t.Fatalf("%s/%s: no workflow task completed after %s #%d:\n%s", id, runID, typ, nth, c.historyText(id, runID))
	return 0
}

// completed counts the completions of activity typ in the run's history.
func (c *opCase) completed(id, runID, typ string) int {
	c.t.Helper()
	scheduled := map[int64]string{}
	n := 0
	for _, ev := range c.history(id, runID) {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] == typ {
			n++
		}
	}
	return n
}

// checkHistories fails the case if any run of the case's workflows failed a workflow task
// with non-determinism (TMPRL1100), and checks every run still running is making progress
// later (the drain waits for it).
func (c *opCase) checkHistories() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	for id := range c.ids {
		res, err := c.r.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: c.r.ns, Query: fmt.Sprintf("WorkflowId = %q", id)})
		if err != nil {
			c.t.Fatal(err)
		}
		runs := map[string]bool{}
		for _, e := range res.GetExecutions() {
			runs[e.GetExecution().GetRunId()] = true
		}
		for rid := range c.runs {
			runs[rid] = true
		}
		for rid := range runs {
			if msg := nonDeterminism(c.historyIfExists(id, rid)); msg != "" {
				c.t.Errorf("%s/%s: %s", id, rid, msg)
			}
		}
	}
}

// historyIfExists is the run's history, or nothing if the run belongs to another workflow ID.
func (c *opCase) historyIfExists(id, runID string) []*historypb.HistoryEvent {
	ctx, cancel := context.WithTimeout(context.Background(), waitShort)
	defer cancel()
	if _, err := c.r.c.DescribeWorkflowExecution(ctx, id, runID); err != nil {
		return nil
	}
	return c.history(id, runID)
}

// openReader opens the storage root from this process, read-only in effect (it appends
// nothing).
func (c *opCase) openReader() (*store.DB, *store.Store) {
	c.t.Helper()
	ctx := context.Background()
	b, err := objstore.OpenBucket(ctx, c.r.storage)
	if err != nil {
		c.t.Fatal(err)
	}
	opts := store.DefaultOptions()
	opts.InstanceID = fmt.Sprintf("op-reader-%s-%d", c.tg.Name, time.Now().UnixNano())
	db := store.OpenDBOnBucket(b, opts)
	c.t.Cleanup(func() { _ = db.Close(context.Background()) })
	s, err := db.Open(ctx, c.tg)
	if err != nil {
		c.t.Fatal(err)
	}
	return db, s
}

// verify reads every row (the oracle), and lists the store: a staged run (data/m-*) the
// latest base does not reference, or an attempt claim, is a leak, an error unless
// leaksAllowed (right after an action, before the next merge collects them). It returns the pending generations.
func (c *opCase) verify(what string, leaksAllowed bool) int {
	c.t.Helper()
	ctx := context.Background()
	db, s := c.openReader()
	rows, dups, err := reliability.ReadAll(ctx, s, store.SourceAll, 1000)
	if err != nil {
		c.t.Fatalf("%s: read: %v", what, err)
	}
	if len(dups) > 0 {
		c.t.Errorf("%s: keys read twice: %v", what, dups)
	}
	for _, v := range c.oracle.Verify(rows) {
		c.t.Errorf("%s: %s", what, v)
	}
	lay, err := reliability.InspectLayout(ctx, db.Bucket(), c.tg)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, o := range lay.Orphans {
		if strings.HasPrefix(filepath.Base(o), "m-") {
			if leaksAllowed {
				c.t.Logf("%s: staged run not referenced (yet to be collected): %s", what, o)
				continue
			}
			c.t.Errorf("%s: staged run leaked (the base does not reference it): %s", what, o)
		}
	}
	for sh, sl := range lay.Shards {
		if len(sl.Attempts) > 0 && !leaksAllowed {
			c.t.Errorf("%s: shard %s: attempt claims left: %v", what, sh, sl.Attempts)
		}
	}
	c.t.Logf("%s: %d keys; %s", what, len(rows), lay.Summary())
	return lay.Pending()
}

// drain is the check after every action: no non-determinism in any history, then the next
// merge (one more generation per shard, so it commits a round) completes through the HTTP
// route and leaves zero pending, every row intact and no staged run leaked.
func (c *opCase) drain() {
	c.t.Helper()
	c.checkHistories()
	c.seal(1)
	st, body := c.mergeWait()
	if st != http.StatusOK {
		c.t.Fatalf("next merge: status %d: %s", st, body)
	}
	var res struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal([]byte(body), &res)
	c.runs[res.RunID] = true
	if p := c.verify("after the next merge", false); p != 0 {
		c.t.Errorf("after the next merge: %d generations pending, want 0", p)
	}
	c.checkHistories()
}

// holdCommit arms the gate on the nth (0-based) base publish of the case's store: the
// CommitRound is then in flight, its attempt claimed "commit", nothing published.
func (c *opCase) holdCommit(skip int) *s3test.Hold {
	h := c.r.gate.Hold(http.MethodPut, skip, "/"+c.tg.Path()+"/_versions/")
	c.t.Cleanup(h.Release)
	return h
}

// holdStaging arms the gate on the first staged-run upload of the case's store: a Prepare
// is then in flight, its run not yet written.
func (c *opCase) holdStaging() *s3test.Hold {
	h := c.r.gate.Hold(http.MethodPut, 0, "/"+c.tg.Path()+"/data/m-")
	c.t.Cleanup(h.Release)
	return h
}

// nonDeterminism describes the first workflow task of evs that failed with non-determinism
// (TMPRL1100), "" if none did.
func nonDeterminism(evs []*historypb.HistoryEvent) string {
	for _, ev := range evs {
		f := ev.GetWorkflowTaskFailedEventAttributes()
		if f == nil {
			continue
		}
		msg := f.GetFailure().GetMessage()
		if f.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_NON_DETERMINISTIC_ERROR ||
			strings.Contains(msg, "TMPRL1100") || strings.Contains(strings.ToLower(msg), "nondetermin") {
			return fmt.Sprintf("event %d: non-determinism: %s", ev.GetEventId(), msg)
		}
	}
	return ""
}
