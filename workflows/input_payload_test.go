package workflows

import (
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/walkeeper/walkeeper/contract"
)

// rawPayload is a payload as a client other than the SDK's JSON path writes it; an empty
// encoding leaves the metadata out.
func rawPayload(encoding, data string) converter.RawValue {
	p := &commonpb.Payload{Data: []byte(data)}
	if encoding != "" {
		p.Metadata = map[string][]byte{converter.MetadataEncoding: []byte(encoding)}
	}
	return converter.NewRawValue(p)
}

// Every workflow, started with a payload that is not one JSON object (another encoding,
// bytes that do not parse, null, a second argument), fails at once with a non-retryable
// InvalidInput naming the input and runs no activity; the SDK's own decode failed such a
// run with its retryable wrapError instead, ran null as no input, and dropped the second
// argument.
func TestEveryWorkflowRefusesAPayloadThatIsNotOneJSONObject(t *testing.T) {
	cases := []struct {
		name    string
		args    func(valid string) []any
		problem string
	}{
		{"binary/plain", func(string) []any { return []any{rawPayload("binary/plain", `"x"`)} }, `encoding "binary/plain" where json/plain is expected`},
		{"json/protobuf", func(v string) []any { return []any{rawPayload("json/protobuf", v)} }, `encoding "json/protobuf" where json/plain is expected`},
		{"binary/null", func(string) []any { return []any{rawPayload("binary/null", "")} }, `encoding "binary/null" where json/plain is expected`},
		{"no encoding", func(v string) []any { return []any{rawPayload("", v)} }, "a payload without an encoding"},
		{"json/plain not JSON", func(string) []any { return []any{rawPayload("json/plain", "{not json")} }, "not JSON: invalid character"},
		{"json/plain empty", func(string) []any { return []any{rawPayload("json/plain", "")} }, "not JSON: unexpected end of JSON input"},
		{"two JSON values", func(v string) []any { return []any{rawPayload("json/plain", v+" "+v)} }, "not JSON: invalid character"},
		{"null", func(string) []any { return []any{rawPayload("json/plain", " null\n")} }, "null where an object is expected"},
		{"a second argument", func(v string) []any { return []any{rawPayload("json/plain", v), "extra"} }, "more than one argument"},
	}
	workflows := map[string]string{
		contract.MergeWalWorkflow:         `{"target":"generic:gs"}`,
		contract.CompactBaseWorkflow:      `{"target":"generic:gs"}`,
		contract.MergeWalTickWorkflow:     `{"target":"generic:gs"}`,
		contract.MaintenanceSweepWorkflow: `{}`,
		contract.SweepWindowWorkflow:      `{}`,
		contract.ReconcileDemandWorkflow:  `{}`,
	}
	for wf, valid := range workflows {
		for _, c := range cases {
			t.Run(wf+"/"+c.name, func(t *testing.T) {
				requireRefusedRun(t, newEnv(t), "invalid input: input: "+c.problem, wf, c.args(valid)...)
			})
		}
	}
}

// A start without any argument still runs with every field at its default, as the SDK ran
// it: only a payload that is there and not one JSON object is refused.
func TestAWorkflowStartedWithoutInputRunsWithItsDefaults(t *testing.T) {
	env := newEnv(t)
	env.ExecuteWorkflow(contract.MergeWalWorkflow)
	var appErr *temporal.ApplicationError
	require.ErrorAs(t, env.GetWorkflowError(), &appErr)
	require.Equal(t, "invalid input: target: required, e.g. generic:gs", appErr.Message())

	// The sweep's defaults pass its check, so it goes on to list the demand index.
	env = newEnv(t)
	started := trackInflight(env)
	env.ExecuteWorkflow(contract.MaintenanceSweepWorkflow)
	require.True(t, env.IsWorkflowCompleted())
	require.NotEqual(t, contract.ErrTypeInvalidInput, errorType(env.GetWorkflowError()))
	require.Contains(t, started.started, contract.ScanDemandActivity)
}

// An activity-state signal whose payload does not decode (another encoding, bytes that are
// not JSON, JSON of the wrong type) is refused and counted in the status, and the merge goes
// on and completes; a good signal after them is still applied. The SDK dropped such a signal
// too, but counted it only in a metric walkeeper does not export.
func TestActivityStateSignalsThatDoNotDecodeAreRefusedAndCounted(t *testing.T) {
	metrics := newCountingMetrics()
	env, prepareIDs := slowPrepareEnv(t, metrics)

	var seen []contract.MergeWalStatus
	at := func(d time.Duration, fn func()) { env.RegisterDelayedCallback(fn, d) }
	at(5*time.Second, func() {
		env.SignalWorkflow(contract.ActivityStateSignal, rawPayload("binary/plain", "x"))
		env.SignalWorkflow(contract.ActivityStateSignal, rawPayload("json/plain", "{not json"))
		env.SignalWorkflow(contract.ActivityStateSignal, "garbage")
		require.NotEmpty(t, *prepareIDs)
		env.SignalWorkflow(contract.ActivityStateSignal, contract.ActivityState{ActivityID: (*prepareIDs)[0], State: contract.ActivityStateWaitingBudget, Attempt: 1})
	})
	at(6*time.Second, func() { seen = append(seen, queryStatus(t, env)) })

	env.ExecuteWorkflow(MergeWal, contract.MergeWalInput{Target: "generic:gs"})
	res := mergeResult(t, env)
	require.Equal(t, 4, res.Reclaimed)
	require.Len(t, seen, 1)
	require.Equal(t, 3, seen[0].RefusedSignals)
	require.Equal(t, contract.BlockedBudget, seen[0].Shards[0].Blocked, "the good signal after the refused ones is applied")
	// The SDK counter the worker exports to Prometheus.
	metrics.requireCount(t, contract.MetricRefusedSignals, contract.ActivityStateSignal, "MergeWal", 3)
}

// countingMetrics is an SDK metrics handler that adds up counters by name and the tags
// signal and workflow.
type countingMetrics struct {
	tags   map[string]string
	mu     *sync.Mutex
	counts map[string]int64
}

func newCountingMetrics() *countingMetrics {
	return &countingMetrics{mu: &sync.Mutex{}, counts: map[string]int64{}}
}

// requireCount requires the counter name of the runs tagged signal and workflow to add up to n.
func (m *countingMetrics) requireCount(t *testing.T, name, signal, workflow string, n int64) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Equal(t, n, m.counts[name+"{signal="+signal+",workflow="+workflow+"}"], "%v", m.counts)
}

func (m *countingMetrics) WithTags(tags map[string]string) client.MetricsHandler {
	c := &countingMetrics{tags: map[string]string{}, mu: m.mu, counts: m.counts}
	maps.Copy(c.tags, m.tags)
	maps.Copy(c.tags, tags)
	return c
}

func (m *countingMetrics) Counter(name string) client.MetricsCounter {
	key := name + "{signal=" + m.tags[contract.MetricTagSignal] + ",workflow=" + m.tags[contract.MetricTagWorkflow] + "}"
	return counterFunc(func(d int64) {
		m.mu.Lock()
		m.counts[key] += d
		m.mu.Unlock()
	})
}

func (m *countingMetrics) Gauge(string) client.MetricsGauge {
	return client.MetricsNopHandler.Gauge("")
}
func (m *countingMetrics) Timer(string) client.MetricsTimer {
	return client.MetricsNopHandler.Timer("")
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }
