package worker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// Temporal connection defaults.
const (
	DefaultTemporalHostPort  = "127.0.0.1:7233"
	DefaultTemporalNamespace = "default"
)

// Schedule and workflow names owned by the Temporal plumbing (docs/DESIGN.md §4).
const (
	// SweepScheduleID is the Schedule that runs the sweep: one SweepWindow per window
	// (docs/DESIGN.md §12, "Sweep windows").
	SweepScheduleID = "walkeeper-sweep"
	// SweepWorkflowID is the workflow ID prefix of sweep windows (Temporal appends the
	// nominal start time to every scheduled workflow ID). Before windows the schedule started
	// a MaintenanceSweep per interval, with the prefix "maintenance-sweep".
	SweepWorkflowID = "sweep-window"
	// SweepCatchupWindow bounds how late a missed sweep may still start.
	SweepCatchupWindow = time.Minute
	// DefaultSweepWindow is how long one SweepWindow runs rounds (SweepSchedule.Window).
	DefaultSweepWindow = contract.DefaultSweepWindow

	// TargetSchedulePrefix prefixes per-target merge schedules: "merge-wal-tick/<kind>/<name>".
	TargetSchedulePrefix = "merge-wal-tick/"

	scheduleNote = "managed by walkeeper"

	// DefaultScheduleJitter is the default jitter of walkeeper's schedules (ScheduleJitter).
	DefaultScheduleJitter = 5 * time.Second
)

// ScheduleJitter is the jitter a schedule of interval every gets: Temporal delays each
// start by a random amount up to it, so per-target schedules created together, and sweeps
// of several clusters, do not all fire on the same second. It is at most jitter and at most
// a quarter of the interval, so a short interval keeps its cadence. Pure.
func ScheduleJitter(every, jitter time.Duration) time.Duration {
	return max(0, min(jitter, every/4))
}

// SweepSchedule configures the schedule walkeeper-sweep.
type SweepSchedule struct {
	// Every is the time between two sweep rounds.
	Every time.Duration
	// Window is how long one SweepWindow runs rounds, and the schedule's interval (0 =
	// DefaultSweepWindow). A window shorter than Every runs one round.
	Window time.Duration
	// Jitter bounds the random delay of each window's start (ScheduleJitter of Window).
	Jitter time.Duration
	// Input is the sweep's input (thresholds, batching); zero fields take their defaults.
	Input contract.MaintenanceSweepInput
}

// TemporalConfig says how to reach Temporal. TLS is switched on by TLS, by any of the TLS
// files, or by an API key (Temporal Cloud).
type TemporalConfig struct {
	HostPort      string `json:"host_port"`
	Namespace     string `json:"namespace"`
	TLS           bool   `json:"tls"`
	TLSCert       string `json:"tls_cert,omitempty"`        // client certificate (PEM file), mTLS
	TLSKey        string `json:"tls_key,omitempty"`         // client key (PEM file), mTLS
	TLSCA         string `json:"tls_ca,omitempty"`          // CA bundle (PEM file) to verify the server
	TLSServerName string `json:"tls_server_name,omitempty"` // SNI / verification name override
	APIKey        string `json:"-"`                         // never logged or serialised

	// envErrs holds environment values that did not parse (RegisterFlags); Validate
	// reports them. The flags, environment variables and help texts come from the knob
	// table (config_knobs.go, config_flags.go).
	envErrs envErrors
}

// DefaultTemporalConfig is the local dev server's address and namespace, without TLS.
func DefaultTemporalConfig() TemporalConfig {
	return TemporalConfig{HostPort: DefaultTemporalHostPort, Namespace: DefaultTemporalNamespace}
}

// ClientOptions turns the config into SDK client options. logger may be nil.
func (c TemporalConfig) ClientOptions(logger *zap.Logger) (client.Options, error) {
	opts := client.Options{
		HostPort:  c.HostPort,
		Namespace: c.Namespace,
		Logger:    NewTemporalLogger(logger),
	}
	if opts.HostPort == "" {
		opts.HostPort = DefaultTemporalHostPort
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultTemporalNamespace
	}
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return client.Options{}, err
	}
	opts.ConnectionOptions.TLS = tlsCfg
	if c.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(c.APIKey)
	}
	return opts, nil
}

func (c TemporalConfig) tlsConfig() (*tls.Config, error) {
	if !c.TLS && c.TLSCert == "" && c.TLSKey == "" && c.TLSCA == "" && c.TLSServerName == "" && c.APIKey == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, errors.New("temporal TLS: --temporal-tls-cert and --temporal-tls-key must be given together")
	}
	if c.TLSCert != "" {
		pair, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("temporal TLS: load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("temporal TLS: read CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal TLS: no PEM certificates in %s", c.TLSCA)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Dial connects to Temporal and checks that the frontend answers. SDK logs go to logger
// (may be nil). The caller closes the client.
func Dial(ctx context.Context, cfg TemporalConfig, logger *zap.Logger) (client.Client, error) {
	opts, err := cfg.ClientOptions(logger)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("dial temporal %s (namespace %s): %w", opts.HostPort, opts.Namespace, err)
	}
	return c, nil
}

// EnsureSearchAttributes registers walkeeper's search attributes (contract.SearchAttributes:
// WalTarget, WalKind, WalPending, WalTrigger, WalPendingAtStart, WalReclaimed, WalBytesMerged)
// in namespace ns through the operator API, so a vanilla server or cluster needs no manual
// step. On SQL visibility they take all 3 custom Int slots of the namespace. Idempotent and safe to race: attributes that already exist with the right type are
// left alone and an AlreadyExists answer counts as success. An attribute registered with a
// different type is an error (the workflows would fail their tasks forever otherwise).
// Needs operator permissions; on Temporal Cloud register them once with tcld instead.
func EnsureSearchAttributes(ctx context.Context, c client.Client, ns string) error {
	if ns == "" {
		ns = DefaultTemporalNamespace
	}
	want := contract.SearchAttributes
	var missing map[string]enumspb.IndexedValueType
	err := whileNamespaceUnserved(ctx, ns, namespaceServeWait, func() error {
		var err error
		missing, err = missingSearchAttributes(ctx, c, ns, want)
		if err != nil || len(missing) == 0 {
			return err
		}
		_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			SearchAttributes: missing,
			Namespace:        ns,
		})
		var exists *serviceerror.AlreadyExists
		if err != nil && !errors.As(err, &exists) {
			return fmt.Errorf("add search attributes %s in namespace %s: %w", saNames(missing), ns, err)
		}
		return nil
	})
	if err != nil || len(missing) == 0 {
		return err
	}
	// The frontend caches the search-attribute map; wait (bounded) until it lists them all
	// so that the first workflow started after this call can use them.
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing, err = missingSearchAttributes(ctx, c, ns, want)
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("search attributes %s still missing in namespace %s after registration", saNames(missing), ns)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// namespaceServeWait bounds how long EnsureSearchAttributes waits for a namespace that the
// operator API does not serve yet. A namespace registered moments ago is answered by
// DescribeNamespace at once but by the operator and visibility APIs only after the
// frontend's namespace registry refreshes (10 s by default; seen on the PostgreSQL-backed
// server, docs/TEMPORAL.md), so a worker started right after its namespace was created
// would otherwise fail its start.
const namespaceServeWait = 45 * time.Second

// whileNamespaceUnserved runs f until it returns anything but NamespaceNotFound, for at most
// within; then the NamespaceNotFound is returned, wrapped with what to do about it.
func whileNamespaceUnserved(ctx context.Context, ns string, within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		var notFound *serviceerror.NamespaceNotFound
		if !errors.As(err, &notFound) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s is not served after %s: create it (temporal operator namespace create -n %s) or check --temporal-namespace: %w", ns, within, ns, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for namespace %s to be served: %w (last: %v)", ns, ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func missingSearchAttributes(ctx context.Context, c client.Client, ns string, want map[string]enumspb.IndexedValueType) (map[string]enumspb.IndexedValueType, error) {
	resp, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
	if err != nil {
		return nil, fmt.Errorf("list search attributes in namespace %s: %w", ns, err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range want {
		have, ok := resp.GetCustomAttributes()[name]
		if !ok {
			have, ok = resp.GetSystemAttributes()[name]
		}
		switch {
		case !ok:
			missing[name] = typ
		case have != typ:
			return nil, fmt.Errorf("search attribute %s is registered as %s in namespace %s, walkeeper needs %s", name, have, ns, typ)
		}
	}
	return missing, nil
}

func saNames(m map[string]enumspb.IndexedValueType) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

// EnsureSweepSchedule creates the Schedule "walkeeper-sweep" that starts one SweepWindow
// (default input) per DefaultSweepWindow on the shared task queue, running a sweep round
// every `every`, or, if it exists, reconciles its spec, action and policies (an upgrade from
// the MaintenanceSweep-per-interval action gets the window action). See
// EnsureSweepScheduleOpts.
func EnsureSweepSchedule(ctx context.Context, c client.Client, every time.Duration) error {
	return EnsureSweepScheduleWith(ctx, c, every, contract.MaintenanceSweepInput{})
}

// EnsureSweepScheduleWith is EnsureSweepSchedule with explicit sweep thresholds.
func EnsureSweepScheduleWith(ctx context.Context, c client.Client, every time.Duration, in contract.MaintenanceSweepInput) error {
	return EnsureSweepScheduleOpts(ctx, c, SweepSchedule{Every: every, Jitter: DefaultScheduleJitter, Input: in})
}

// EnsureSweepScheduleOpts is EnsureSweepSchedule with every setting explicit.
//
// Overlap BUFFER_ONE: two windows never run at once, and a window whose last round runs past
// the next tick delays the next window instead of making the schedule skip it (SKIP would
// leave a whole window without sweeps). Interval specs are aligned to the epoch, so a new
// schedule would first fire at the next whole window; unless the schedule is paused, a
// window is started at once when none runs (the first deployment, an upgrade from the
// MaintenanceSweep action, a window that failed).
func EnsureSweepScheduleOpts(ctx context.Context, c client.Client, o SweepSchedule) error {
	every, in := o.Every, o.Input
	if every <= 0 {
		return fmt.Errorf("sweep schedule interval must be positive, got %s", every)
	}
	window := o.Window
	if window == 0 {
		window = DefaultSweepWindow
	}
	if window < 0 {
		return fmt.Errorf("sweep window must be positive, got %s", window)
	}
	input := contract.SweepWindowInput{Sweep: in, Interval: every, Window: window}
	if err := input.Validate(); err != nil {
		return fmt.Errorf("sweep schedule: every window would fail at once: %w", err)
	}
	action := &client.ScheduleWorkflowAction{
		ID:        SweepWorkflowID,
		Workflow:  contract.SweepWindowWorkflow,
		Args:      []any{input},
		TaskQueue: contract.TaskQueue,
		Priority:  contract.SweepPriority, // ahead of the merges it starts on the same queue
		// Per run (a window continues as new within its event budget): the window, plus
		// room for a last round that lists slowly or paces many starts.
		WorkflowRunTimeout: window + 30*time.Minute,
		StaticSummary:      fmt.Sprintf("walkeeper sweep window: a round every %s for %s", every, window),
		StaticDetails: "Runs a sweep round every interval: lists the demand index of every kind and starts MergeWal / CompactBase " +
			"for the stores over a threshold. Rounds that start nothing leave only their listings here. The current details list " +
			"the last rounds that started something and why the rest was skipped; WalSweepStarts counts the window's starts.",
	}
	err := ensureScheduleWith(ctx, c, SweepScheduleID, window, ScheduleJitter(window, o.Jitter), action, enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE)
	if err != nil {
		return err
	}
	_, err = startSweepWindowIfIdle(ctx, c)
	return err
}

// startSweepWindowIfIdle triggers the sweep schedule when it is not paused and no window
// runs, and says whether it did. A MaintenanceSweep left running by the schedule's old
// action gets the window queued behind it (BUFFER_ONE) rather than beside it.
func startSweepWindowIfIdle(ctx context.Context, c client.Client) (bool, error) {
	d, err := DescribeSchedule(ctx, c, SweepScheduleID)
	if err != nil {
		return false, err
	}
	if d.Schedule.State != nil && d.Schedule.State.Paused {
		return false, nil
	}
	overlap := enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
	for _, r := range d.Info.RunningWorkflows {
		if strings.HasPrefix(r.WorkflowID, SweepWorkflowID+"-") {
			return false, nil
		}
		overlap = enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE
	}
	if err := c.ScheduleClient().GetHandle(ctx, SweepScheduleID).Trigger(ctx, client.ScheduleTriggerOptions{Overlap: overlap}); err != nil {
		return false, fmt.Errorf("trigger schedule %s: %w", SweepScheduleID, err)
	}
	return true, nil
}

// runningSweepWindows lists the IDs of the sweep windows the schedule is running.
func runningSweepWindows(ctx context.Context, c client.Client) ([]string, *client.ScheduleDescription, error) {
	d, err := DescribeSchedule(ctx, c, SweepScheduleID)
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	for _, r := range d.Info.RunningWorkflows {
		if strings.HasPrefix(r.WorkflowID, SweepWorkflowID+"-") {
			ids = append(ids, r.WorkflowID)
		}
	}
	return ids, d, nil
}

// SweepNow asks for a sweep round now and says how: the running window gets the signal
// walkeeper-sweep-now (a round at once, the window's cadence kept); with no window running
// the schedule is triggered, which starts a window whose first round runs at once. While the
// schedule is paused and no window runs, one MaintenanceSweep with the schedule's sweep input
// runs instead (a window would go on sweeping for a whole window).
func SweepNow(ctx context.Context, c client.Client) (string, error) {
	ids, d, err := runningSweepWindows(ctx, c)
	if err != nil {
		return "", err
	}
	for _, id := range ids {
		err := c.SignalWorkflow(ctx, id, "", contract.SweepNowSignal, nil)
		if err == nil {
			return "signaled sweep window " + id + " for a round now", nil
		}
		var notFound *serviceerror.NotFound
		if !errors.As(err, &notFound) { // a window that just closed falls through
			return "", fmt.Errorf("signal sweep window %s: %w", id, err)
		}
	}
	if d.Schedule.State != nil && d.Schedule.State.Paused {
		var in contract.SweepWindowInput
		if a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction); ok && len(a.Args) == 1 {
			if p, ok := a.Args[0].(*commonpb.Payload); ok {
				_ = converter.GetDefaultDataConverter().FromPayload(p, &in) // unreadable: the default thresholds
			}
		}
		id := fmt.Sprintf("%s-now-%s", SweepWorkflowID, time.Now().UTC().Format(time.RFC3339))
		run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: id, TaskQueue: contract.TaskQueue, WorkflowRunTimeout: 30 * time.Minute, Priority: contract.SweepPriority,
			StaticSummary: "walkeeper sweep now (schedule " + SweepScheduleID + " paused)",
		}, contract.MaintenanceSweepWorkflow, in.Sweep)
		if err != nil {
			return "", fmt.Errorf("start sweep %s: %w", id, err)
		}
		return "schedule " + SweepScheduleID + " is paused: started one MaintenanceSweep " + run.GetID(), nil
	}
	if err := c.ScheduleClient().GetHandle(ctx, SweepScheduleID).Trigger(ctx, client.ScheduleTriggerOptions{
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE,
	}); err != nil {
		return "", fmt.Errorf("trigger schedule %s: %w", SweepScheduleID, err)
	}
	return "no sweep window was running: schedule " + SweepScheduleID + " triggered, its window sweeps at once", nil
}

// PauseSweep pauses walkeeper-sweep and cancels the running window, so sweeps stop now and
// not at the window's end (pausing the schedule alone, e.g. from Temporal Web, only stops
// new windows). Manual sweeps (SweepNow) still work.
func PauseSweep(ctx context.Context, c client.Client, note string) error {
	if err := PauseSchedule(ctx, c, SweepScheduleID, note); err != nil {
		return err
	}
	ids, _, err := runningSweepWindows(ctx, c)
	if err != nil {
		return err
	}
	return cancelSweepWindows(ctx, c, ids)
}

// DeleteSweep deletes walkeeper-sweep and cancels its running window (deleting the schedule
// alone leaves the window sweeping until its end).
func DeleteSweep(ctx context.Context, c client.Client) error {
	ids, _, err := runningSweepWindows(ctx, c)
	if err != nil {
		return err
	}
	if err := DeleteSchedule(ctx, c, SweepScheduleID); err != nil {
		return err
	}
	return cancelSweepWindows(ctx, c, ids)
}

// cancelSweepWindows requests the cancellation of the windows ids; one that has closed
// meanwhile is no error.
func cancelSweepWindows(ctx context.Context, c client.Client, ids []string) error {
	for _, id := range ids {
		if err := c.CancelWorkflow(ctx, id, ""); err != nil {
			var notFound *serviceerror.NotFound
			if !errors.As(err, &notFound) {
				return fmt.Errorf("cancel sweep window %s: %w", id, err)
			}
		}
	}
	return nil
}

// ResumeSweep unpauses walkeeper-sweep and starts a window now if none runs, so sweeps
// resume at once and not at the next whole window.
func ResumeSweep(ctx context.Context, c client.Client, note string) error {
	if err := ResumeSchedule(ctx, c, SweepScheduleID, note); err != nil {
		return err
	}
	_, err := startSweepWindowIfIdle(ctx, c)
	return err
}

// TargetScheduleID is the ID of target's own merge schedule: "merge-wal-tick/<kind>/<name>".
func TargetScheduleID(t store.Target) string { return TargetSchedulePrefix + t.Path() }

// EnsureTargetSchedule creates or updates a Schedule that merges one target every `every`.
// The action is the thin workflow "MergeWalTick" with input {"target": "<kind>:<name>"}:
// Temporal suffixes every scheduled workflow ID with a timestamp, so the tick itself starts
// or attaches to the real MergeWal ID ("merge-wal/<kind>/<name>") and dedupe still holds.
func EnsureTargetSchedule(ctx context.Context, c client.Client, target store.Target, every time.Duration) error {
	return EnsureTargetScheduleJitter(ctx, c, target, every, DefaultScheduleJitter)
}

// EnsureTargetScheduleJitter is EnsureTargetSchedule with an explicit jitter bound
// (ScheduleJitter).
func EnsureTargetScheduleJitter(ctx context.Context, c client.Client, target store.Target, every, jitter time.Duration) error {
	if every <= 0 {
		return fmt.Errorf("schedule interval must be positive, got %s", every)
	}
	id := TargetScheduleID(target)
	action := &client.ScheduleWorkflowAction{
		ID:                 id,
		Workflow:           contract.MergeWalTickWorkflow,
		Args:               []any{map[string]any{"target": target.String()}},
		TaskQueue:          contract.TaskQueue,
		WorkflowRunTimeout: 10 * time.Minute,
		StaticSummary:      "merge tick for " + target.String(),
		TypedSearchAttributes: temporal.NewSearchAttributes(
			contract.WalTarget.ValueSet(target.String()),
			contract.WalKind.ValueSet(string(target.Kind)),
		),
	}
	return ensureSchedule(ctx, c, id, every, ScheduleJitter(every, jitter), action)
}

func ensureSchedule(ctx context.Context, c client.Client, id string, every, jitter time.Duration, action *client.ScheduleWorkflowAction) error {
	return ensureScheduleWith(ctx, c, id, every, jitter, action, enumspb.SCHEDULE_OVERLAP_POLICY_SKIP)
}

// ensureScheduleWith is ensureSchedule with an explicit overlap policy.
func ensureScheduleWith(ctx context.Context, c client.Client, id string, every, jitter time.Duration, action *client.ScheduleWorkflowAction, overlap enumspb.ScheduleOverlapPolicy) error {
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}, Jitter: jitter}
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:            id,
		Spec:          spec,
		Action:        action,
		Overlap:       overlap,
		CatchupWindow: SweepCatchupWindow,
		Note:          scheduleNote,
	})
	if err == nil {
		return nil
	}
	if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		return fmt.Errorf("create schedule %s: %w", id, err)
	}
	err = c.ScheduleClient().GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
		DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
			s := in.Description.Schedule
			s.Spec = &spec
			s.Action = action
			if s.Policy == nil {
				s.Policy = &client.SchedulePolicies{}
			}
			s.Policy.Overlap = overlap
			s.Policy.CatchupWindow = SweepCatchupWindow
			return &client.ScheduleUpdate{Schedule: &s}, nil
		},
	})
	if err != nil {
		return fmt.Errorf("update schedule %s: %w", id, err)
	}
	return nil
}

// PauseSchedule pauses schedule id with an operator note. Manual triggers still work.
func PauseSchedule(ctx context.Context, c client.Client, id, note string) error {
	if note == "" {
		note = "paused with walkeeper"
	}
	if err := c.ScheduleClient().GetHandle(ctx, id).Pause(ctx, client.SchedulePauseOptions{Note: note}); err != nil {
		return fmt.Errorf("pause schedule %s: %w", id, err)
	}
	return nil
}

// ResumeSchedule unpauses schedule id.
func ResumeSchedule(ctx context.Context, c client.Client, id, note string) error {
	if note == "" {
		note = "resumed with walkeeper"
	}
	if err := c.ScheduleClient().GetHandle(ctx, id).Unpause(ctx, client.ScheduleUnpauseOptions{Note: note}); err != nil {
		return fmt.Errorf("resume schedule %s: %w", id, err)
	}
	return nil
}

// TriggerSchedule runs schedule id's action now (even while paused). Overlap SKIP still
// applies: if the previous action is running, nothing new starts.
func TriggerSchedule(ctx context.Context, c client.Client, id string) error {
	err := c.ScheduleClient().GetHandle(ctx, id).Trigger(ctx, client.ScheduleTriggerOptions{
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
	})
	if err != nil {
		return fmt.Errorf("trigger schedule %s: %w", id, err)
	}
	return nil
}

// DescribeSchedule returns the schedule's spec, state and recent/next actions.
func DescribeSchedule(ctx context.Context, c client.Client, id string) (*client.ScheduleDescription, error) {
	d, err := c.ScheduleClient().GetHandle(ctx, id).Describe(ctx)
	if err != nil {
		return nil, fmt.Errorf("describe schedule %s: %w", id, err)
	}
	return d, nil
}

// DeleteSchedule deletes schedule id; running workflows it started keep running.
func DeleteSchedule(ctx context.Context, c client.Client, id string) error {
	if err := c.ScheduleClient().GetHandle(ctx, id).Delete(ctx); err != nil {
		return fmt.Errorf("delete schedule %s: %w", id, err)
	}
	return nil
}
