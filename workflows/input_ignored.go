package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/walkeeper/walkeeper/contract"
)

// ignoredKey keys the run's ignoredInput in its workflow.Context.
type ignoredKey struct{}

// ignoredInput is what a run's input held that no field took: at most
// contract.MaxUnknownFieldNames names and how many there were.
type ignoredInput struct {
	names []string
	total int
}

// noteIgnoredFields reports the members of the run's JSON input data that decoding into in
// ignored: a warning, the SDK counter contract.MetricIgnoredInputFields and the run's current
// details, and it returns ctx carrying them for the status and later details. Logger and
// metrics are replay-safe and none of it is a command, so every history replays alike.
func noteIgnoredFields(ctx workflow.Context, data []byte, in any) workflow.Context {
	names, total := contract.UnknownInputFields(data, in)
	if total == 0 {
		return ctx
	}
	typ := workflow.GetInfo(ctx).WorkflowType.Name
	workflow.GetLogger(ctx).Warn("Input fields ignored: this workflow's input has no such field, so the run goes on without them.",
		"fields", names, "count", total)
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{contract.MetricTagWorkflow: typ}).
		Counter(contract.MetricIgnoredInputFields).Inc(int64(total))
	ctx = workflow.WithValue(ctx, ignoredKey{}, ignoredInput{names: names, total: total})
	setDetails(ctx, "")
	return ctx
}

// ignoredFields are the names of the run's ignored input members (noteIgnoredFields), or nil
// (also for a nil ctx, as a planner's test builds a run).
func ignoredFields(ctx workflow.Context) []string {
	if ctx == nil {
		return nil
	}
	ig, _ := ctx.Value(ignoredKey{}).(ignoredInput)
	return ig.names
}

// setDetails sets the run's current details (Temporal Web, `temporal workflow metadata`) to
// s, after a line naming its ignored input members when it had any, so no refresh hides them.
func setDetails(ctx workflow.Context, s string) {
	ig, _ := ctx.Value(ignoredKey{}).(ignoredInput)
	if ig.total == 0 {
		workflow.SetCurrentDetails(ctx, s)
		return
	}
	quoted := make([]string, len(ig.names))
	for i, n := range ig.names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	line := "**input fields ignored** (no such field): " + strings.Join(quoted, ", ")
	if more := ig.total - len(ig.names); more > 0 {
		line += fmt.Sprintf(", and %d more", more)
	}
	if s != "" {
		line += "\n\n" + s
	}
	workflow.SetCurrentDetails(ctx, line)
}
