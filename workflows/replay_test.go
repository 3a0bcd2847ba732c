package workflows

import (
	"path/filepath"
	"testing"

	"go.temporal.io/sdk/worker"
)

// TestReplay replays every recorded history in testdata/replay against the current
// workflow code: a change that would break a running workflow fails here, before deploy.
// Record a history from a real server with
//
//	temporal workflow show --workflow-id merge-wal/generic/gs --output json > testdata/replay/<name>.json
//
// and check it in with the change that produced it.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "replay", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Skip("no recorded histories in testdata/replay yet")
	}
	replayer := worker.NewWorkflowReplayer()
	Register(replayer)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if err := replayer.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
