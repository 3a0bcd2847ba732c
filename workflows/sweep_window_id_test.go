package workflows

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// A window whose workflow ID is as long as Temporal allows (1,000 bytes) still starts its
// merges: the reason it gives each start names the window within the reason's bound.
func TestSweepWindowWithALongIDStartsItsMerges(t *testing.T) {
	f := &windowFleet{debtAt: map[int]bool{1: true}}
	f.starter.validate = true
	env := newWindowEnv(t, f)
	id := "sweep-window/" + strings.Repeat("w", 1000-len("sweep-window/"))
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})

	res := runWindow(t, env, contract.SweepWindowInput{Interval: 10 * time.Second, Window: 15 * time.Second})
	require.Equal(t, 1, res.Totals.Started, "%+v", res)
	require.Len(t, f.starter.requests, 1)
	reason := f.starter.requests[0].Reason
	require.LessOrEqual(t, len(reason), contract.MaxTriggerReasonBytes)
	require.True(t, strings.HasPrefix(reason, "12 pending >= 8; sweep window sweep-window/www"), reason)
	require.True(t, strings.HasSuffix(reason, " round 1"), reason)
}

// A window that started before the change names its ID in full, as before.
func TestSweepWindowWithALongIDOldPathNamesItInFull(t *testing.T) {
	f := &windowFleet{debtAt: map[int]bool{1: true}}
	env := newWindowEnv(t, f)
	id := strings.Repeat("w", 300)
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: id})
	env.OnGetVersion(sweepReasonBoundedChange, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)

	runWindow(t, env, contract.SweepWindowInput{Interval: 10 * time.Second, Window: 15 * time.Second})
	require.Len(t, f.starter.requests, 1)
	require.Equal(t, "12 pending >= 8; sweep window "+id+" round 1", f.starter.requests[0].Reason)
}

func TestReasonWindowID(t *testing.T) {
	require.Equal(t, "sweep-window/2026", reasonWindowID("sweep-window/2026"))
	require.Equal(t, "a?b", reasonWindowID("a\nb"))
	long := reasonWindowID(strings.Repeat("é", 1000))
	require.LessOrEqual(t, len(long), maxReasonWindowBytes+len("…"))
	require.True(t, strings.HasSuffix(long, "é…"), long)
}
