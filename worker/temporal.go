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

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
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
	// SweepScheduleID is the Schedule that runs MaintenanceSweep.
	SweepScheduleID = "walkeeper-sweep"
	// SweepWorkflowID is the workflow ID prefix of sweep runs (Temporal appends the
	// nominal start time to every scheduled workflow ID).
	SweepWorkflowID = "maintenance-sweep"
	// SweepCatchupWindow bounds how late a missed sweep may still start.
	SweepCatchupWindow = time.Minute

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
	Every time.Duration
	// Jitter bounds the random delay of each start (ScheduleJitter).
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
	missing, err := missingSearchAttributes(ctx, c, ns, want)
	if err != nil {
		return err
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		SearchAttributes: missing,
		Namespace:        ns,
	})
	var exists *serviceerror.AlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("add search attributes %s in namespace %s: %w", saNames(missing), ns, err)
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

// EnsureSweepSchedule creates the Schedule "walkeeper-sweep" that starts MaintenanceSweep
// (default input) on the shared task queue every `every`, or, if it exists, reconciles its
// spec, action and policies. Overlap SKIP: a sweep still running makes the next tick a no-op;
// catch-up window 1m. A paused schedule stays paused (pausing is an operator's decision).
func EnsureSweepSchedule(ctx context.Context, c client.Client, every time.Duration) error {
	return EnsureSweepScheduleWith(ctx, c, every, contract.MaintenanceSweepInput{})
}

// EnsureSweepScheduleWith is EnsureSweepSchedule with explicit sweep thresholds.
func EnsureSweepScheduleWith(ctx context.Context, c client.Client, every time.Duration, in contract.MaintenanceSweepInput) error {
	return EnsureSweepScheduleOpts(ctx, c, SweepSchedule{Every: every, Jitter: DefaultScheduleJitter, Input: in})
}

// EnsureSweepScheduleOpts is EnsureSweepSchedule with every setting explicit.
func EnsureSweepScheduleOpts(ctx context.Context, c client.Client, o SweepSchedule) error {
	every, in := o.Every, o.Input
	if every <= 0 {
		return fmt.Errorf("sweep schedule interval must be positive, got %s", every)
	}
	action := &client.ScheduleWorkflowAction{
		ID:        SweepWorkflowID,
		Workflow:  contract.MaintenanceSweepWorkflow,
		Args:      []any{in},
		TaskQueue: contract.TaskQueue,
		// A sweep only scans and starts workflows; if it runs this long something is wrong,
		// and the next tick should get its turn.
		WorkflowRunTimeout: 30 * time.Minute,
		StaticSummary:      "walkeeper maintenance sweep",
	}
	return ensureSchedule(ctx, c, SweepScheduleID, every, ScheduleJitter(every, o.Jitter), action)
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
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}, Jitter: jitter}
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:            id,
		Spec:          spec,
		Action:        action,
		Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
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
			s.Policy.Overlap = enumspb.SCHEDULE_OVERLAP_POLICY_SKIP
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
