package workflows

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// replayDir holds the recorded histories; v1Manifest pins the ones recorded when the
// protocol was declared v1 (docs/DESIGN.md §4 "Versions").
const (
	replayDir  = "testdata/replay"
	v1Manifest = "testdata/replay/v1.sha256"
)

// TestReplay replays every recorded history in testdata/replay against the current
// workflow code: a change that would break a running workflow fails here, before deploy.
// Record the histories with
//
//	WALKEEPER_RECORD_HISTORIES=1 go test ./test/integration -run TestRecordReplayHistories
//
// Each history replays as a run whose run ID differs from the one it was recorded under
// (unless it is a reset run: then under the reset run's own ID), so workflow code that puts
// the run ID into a command fails here the way a reset run fails on a server.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(replayDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no recorded histories in "+replayDir)
	covered := map[string]bool{}
	for _, f := range files {
		h := readHistory(t, f)
		covered[h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetWorkflowType().GetName()] = true
		t.Run(filepath.Base(f), func(t *testing.T) { replay(t, h) })
	}
	for _, name := range registeredWorkflows() {
		if !covered[name] {
			t.Errorf("no recorded history of workflow %s in %s", name, replayDir)
		}
	}
}

// TestReplayV1HistoriesUnchanged keeps the v1 baseline: the histories recorded at v1 stay
// as recorded. A workflow change that does not replay them needs workflow.GetVersion, and
// histories of the new behaviour are added beside them under new names, never over them.
func TestReplayV1HistoriesUnchanged(t *testing.T) {
	f, err := os.Open(v1Manifest)
	require.NoError(t, err)
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("%s: malformed line %q", v1Manifest, sc.Text())
		}
		raw, err := os.ReadFile(filepath.Join(replayDir, name))
		if err != nil {
			t.Errorf("v1 history %s is gone: %v", name, err)
			continue
		}
		if got := sha256.Sum256(raw); hex.EncodeToString(got[:]) != sum {
			t.Errorf("v1 history %s was rewritten; record the new behaviour under a new name instead", name)
		}
		n++
	}
	require.NoError(t, sc.Err())
	require.Positive(t, n, "%s lists no history", v1Manifest)
}

func readHistory(t *testing.T, path string) *historypb.History {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err, path)
	require.True(t, len(h.GetEvents()) > 0 && h.GetEvents()[0].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
		"%s: not a workflow history", path)
	return h
}

// replay replays h with a replayer of every walkeeper workflow, under replayRunID(h), and
// returns the replayer.
func replay(t *testing.T, h *historypb.History) worker.WorkflowReplayer {
	t.Helper()
	replayer := worker.NewWorkflowReplayer()
	Register(replayer)
	opts := worker.ReplayWorkflowHistoryOptions{OriginalExecution: workflow.Execution{RunID: replayRunID(h)}}
	require.NoError(t, replayer.ReplayWorkflowHistoryWithOptions(nil, h, opts))
	return replayer
}

// replayRunID is the run ID a history replays under: the reset run's own ID when the
// history is a reset run's, otherwise one that differs from the recorded run's.
func replayRunID(h *historypb.History) string {
	for _, ev := range h.GetEvents() {
		a := ev.GetWorkflowTaskFailedEventAttributes()
		if a.GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW && a.GetNewRunId() != "" {
			return a.GetNewRunId()
		}
	}
	return "replay-run-not-the-recorded-one"
}

// registeredWorkflows lists the workflow types Register registers.
func registeredWorkflows() []string {
	var r workflowNames
	Register(&r)
	return r
}

type workflowNames []string

func (r *workflowNames) RegisterWorkflow(any) {}

func (r *workflowNames) RegisterWorkflowWithOptions(_ any, o workflow.RegisterOptions) {
	*r = append(*r, o.Name)
}

func (r *workflowNames) RegisterDynamicWorkflow(any, workflow.DynamicRegisterOptions) {}
