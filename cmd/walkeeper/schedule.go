package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// scheduleFlags select the schedule: the fleet sweep, or one target's merge schedule.
type scheduleFlags struct {
	target  string
	storage string // ensure --target's store check
	every   time.Duration
	window  time.Duration
	jitter  time.Duration
	note    string
}

// maxNoteBytes bounds --note, which the schedule keeps and describe prints.
const maxNoteBytes = 1024

// check refuses, before anything is dialed: for ensure, an --every or --window that is not
// positive, a negative --jitter (else it would silently mean none), and an --every or --window
// that Temporal (a schedule fires at most once a second) or the sweep's windows would refuse;
// and a --note that is longer than maxNoteBytes, not UTF-8 (Temporal's gRPC request would not
// encode) or more than one line.
func (s *scheduleFlags) check(ensure bool) error {
	switch {
	case !ensure: // the interval flags are ensure's
	case s.every <= 0:
		return cli.Usagef("--every must be positive")
	case s.window <= 0:
		return cli.Usagef("--window must be positive")
	case s.jitter < 0:
		return cli.Usagef("--jitter must not be negative, got %s", s.jitter)
	case s.target != "" && s.every < temporaladmin.MinScheduleInterval:
		return cli.Usagef("--every %s: a schedule fires at most once every %s", s.every, temporaladmin.MinScheduleInterval)
	case s.target != "": // the sweep's ranges do not apply to a target's schedule
	case s.every < contract.MinSweepInterval || s.every > contract.MaxSweepInterval:
		return cli.Usagef("--every %s: want %s to %s", s.every, contract.MinSweepInterval, contract.MaxSweepInterval)
	case s.window < contract.MinSweepWindow || s.window > contract.MaxSweepWindow:
		return cli.Usagef("--window %s: want %s to %s", s.window, contract.MinSweepWindow, contract.MaxSweepWindow)
	}
	switch {
	case len(s.note) > maxNoteBytes:
		return cli.Usagef("--note is %d bytes long, at most %d allowed", len(s.note), maxNoteBytes)
	case !utf8.ValidString(s.note):
		return cli.Usagef("--note is not valid UTF-8")
	case strings.IndexFunc(s.note, unicode.IsControl) >= 0:
		return cli.Usagef("--note holds a control character")
	}
	return nil
}

// scheduleMissingError is an operation on a schedule that does not exist, said with how to
// create it instead of Temporal's text about its internal workflow. Exit status 2 (bad input).
type scheduleMissingError struct {
	id     string
	target store.Target // the --target, zero for the sweep schedule
}

func (e *scheduleMissingError) Error() string {
	if e.target == (store.Target{}) {
		return fmt.Sprintf("schedule %s does not exist; create it with: walkeeper schedule ensure "+
			"(a worker creates it on start unless its --sweep-interval is 0)", e.id)
	}
	return fmt.Sprintf("schedule %s does not exist; create it with: walkeeper schedule ensure --target %s", e.id, e.target)
}

func newScheduleCmd(g *globalOptions) *cobra.Command {
	sf := &scheduleFlags{}
	cmd := &cobra.Command{
		Use:   "schedule",
		Short: "Manage the Temporal Schedules that trigger sweeps and merges",
		Long: `Manage walkeeper's Temporal Schedules.

Without --target the schedule is "walkeeper-sweep": once per --window (default 1h) it starts
a SweepWindow workflow, which runs a sweep round every --every: each round lists every store
kind's demand index and starts MergeWal/CompactBase where needed. Rounds that start nothing
leave no workflow behind; the window's current details list the rounds that started
something and why the rest was skipped (docs/DESIGN.md §12). Overlap policy BUFFER_ONE: two
windows never run at once. For the sweep schedule, trigger runs a round now (it signals the
running window), pause also cancels the running window, and resume starts one at once.

With --target <kind>:<name> it is "merge-wal-tick/<kind>/<name>": a per-target schedule whose
action (MergeWalTick) starts or attaches to that target's MergeWal workflow; overlap SKIP.

Both use a one-minute catch-up window.`,
		Args: cli.Args(cobra.ArbitraryArgs),
		RunE: parentRunE,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&sf.target, "target", "", "per-target schedule for <kind>:<name> (default: the sweep schedule walkeeper-sweep)")
	pf.StringVar(&sf.note, "note", "", "note recorded with pause/resume")

	// with runs a sub-command against Temporal once the flags are checked; id is the schedule
	// they select and t, with --target, its target.
	with := func(run func(ctx context.Context, c client.Client, id string, t store.Target, out io.Writer) error) func(*cobra.Command, []string) error {
		return func(cmd *cobra.Command, a []string) error {
			id, t := temporaladmin.SweepScheduleID, store.Target{}
			if sf.target != "" {
				parsed, err := parseTarget(sf.target)
				if err != nil {
					return err
				}
				id, t = temporaladmin.TargetScheduleID(parsed), parsed
			}
			if err := sf.check(cmd.Name() == "ensure"); err != nil {
				return err
			}
			dev := g.devDefaults(cmd) // a running dev's Temporal, unless --temporal says otherwise
			if cmd.Name() == "ensure" {
				if err := g.checkScheduleStore(cmd, sf, t, dev); err != nil {
					return err
				}
			}
			err := g.withTemporal(cmd, func(ctx context.Context, c client.Client) error {
				return run(ctx, c, id, t, cmd.OutOrStdout())
			})
			if errors.As(err, new(*serviceerror.NotFound)) {
				return &scheduleMissingError{id: id, target: t}
			}
			return err
		}
	}

	var ensure *cobra.Command
	ensure = &cobra.Command{
		Use:   "ensure",
		Short: "Create the schedule, or update its interval and action if it exists",
		Long: `Create the schedule, or update its interval, action and policies if it exists.
A paused schedule stays paused. Without --target this is what every worker does on start,
except that an existing walkeeper-sweep keeps its sweep thresholds, batching and pacing (the
workers' --sweep-* knobs, which this command has no flags for); a new one gets the defaults.
With --target the store must exist at --storage ($WALKEEPER_STORAGE, else the running dev's
storage): the schedule would otherwise start a merge that fails every --every, for ever.`,
		Example: `  walkeeper schedule ensure --every 1m --window 1h
  walkeeper schedule ensure --target generic:demo --every 30s --storage s3://walkeeper-data`,
		Args: cli.Args(cobra.NoArgs),
		RunE: with(func(ctx context.Context, c client.Client, id string, t store.Target, out io.Writer) error {
			ensured := fmt.Sprintf("schedule %s ensured: a sweep window every %s, a round every %s", id, sf.window, sf.every)
			ensureOnce := func(ctx context.Context) error {
				// The sweep's thresholds and batching are the workers' (--sweep-*): kept.
				return temporaladmin.EnsureSweepSchedule(ctx, c, temporaladmin.SweepSchedule{Every: sf.every, Window: sf.window, Jitter: sf.jitter, KeepInput: true})
			}
			if sf.target != "" {
				ensured = fmt.Sprintf("schedule %s ensured: every %s", id, sf.every)
				ensureOnce = func(ctx context.Context) error {
					return temporaladmin.EnsureTargetSchedule(ctx, c, t, sf.every, sf.jitter)
				}
			}
			// A deploy job runs this beside a Temporal that has just started, which answers
			// late until it has loaded the schedule's workflow. Ensuring again is harmless:
			// at worst a trigger that went through but was answered late is sent again, and
			// the sweep schedule (BUFFER_ONE) buffers one window behind the running one.
			retrying := func(err error) {
				fmt.Fprintf(ensure.ErrOrStderr(), "walkeeper: Temporal is not answering yet, retrying: %v\n", err)
			}
			if err := temporaladmin.RetryTransient(ctx, temporaladmin.EnsureWithin, retrying, ensureOnce); err != nil {
				return err
			}
			fmt.Fprintln(out, ensured)
			return nil
		}),
	}
	worker.StringKnobVar(ensure.Flags(), &sf.storage, "storage", "",
		"with --target, required: storage root URL, read to refuse a store that does not exist; default: the running dev's")
	ensure.Flags().DurationVar(&sf.every, "every", time.Minute, "interval between actions (the sweep schedule: between sweep rounds)")
	ensure.Flags().DurationVar(&sf.window, "window", temporaladmin.DefaultSweepWindow, "sweep schedule only: how long one SweepWindow workflow runs rounds")
	ensure.Flags().DurationVar(&sf.jitter, "jitter", temporaladmin.DefaultScheduleJitter, "random delay of each action, at most this and at most a quarter of the schedule's interval (0 = none)")

	// pause and resume: for the sweep schedule, temporaladmin also cancels or starts its window.
	stateChange := func(use, short, done string, change func(ctx context.Context, c client.Client, id, note string) error) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  cli.Args(cobra.NoArgs),
			RunE: with(func(ctx context.Context, c client.Client, id string, _ store.Target, out io.Writer) error {
				if err := change(ctx, c, id, sf.note); err != nil {
					return err
				}
				fmt.Fprintf(out, "schedule %s %s\n", id, done)
				return nil
			}),
		}
	}
	// A workflow under a sweep window's ID that is not the schedule's SweepWindow is left
	// running, and pause exits 1 naming it (temporaladmin.ErrSweepWindowForeign).
	pause := stateChange("pause", "Pause the schedule (manual triggers still work); the sweep's running window is canceled",
		"paused", temporaladmin.PauseSchedule)
	resume := stateChange("resume", "Resume a paused schedule (the sweep: and start a window now if none runs)",
		"resumed", temporaladmin.ResumeSchedule)
	trigger := &cobra.Command{
		Use:   "trigger",
		Short: "Run the schedule's action now (the sweep: a round now, in the running window)",
		Long: `Run the schedule's action now. For the sweep schedule this is "sweep now": the running
SweepWindow gets the signal walkeeper-sweep-now and runs a round at once (or, with no window
running, the schedule starts one, whose first round runs at once; while the schedule is paused,
one MaintenanceSweep runs instead). For a per-target schedule
the tick starts now, skipped if the previous one still runs. A schedule edited outside
walkeeper to start another workflow type, on another task queue, or (--target) for another
target, is not triggered (exit 1); 'walkeeper schedule ensure' restores its action. Nor is a
workflow under a window's ID signaled unless it is the SweepWindow the schedule started.`,
		Args: cli.Args(cobra.NoArgs),
		RunE: with(func(ctx context.Context, c client.Client, id string, t store.Target, out io.Writer) error {
			var msg string
			var err error
			if sf.target == "" {
				msg, err = temporaladmin.SweepNow(ctx, c)
			} else {
				msg, err = "schedule "+id+" triggered", temporaladmin.TriggerTargetSchedule(ctx, c, t)
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(out, msg)
			return nil
		}),
	}
	describe := &cobra.Command{
		Use:   "describe",
		Short: "Show the schedule's interval, state and recent and next actions",
		Args:  cli.Args(cobra.NoArgs),
		RunE: with(func(ctx context.Context, c client.Client, id string, _ store.Target, out io.Writer) error {
			d, err := temporaladmin.DescribeSchedule(ctx, c, id)
			if err != nil {
				return err
			}
			return printSchedule(out, id, d)
		}),
	}
	cmd.AddCommand(ensure, pause, resume, trigger, describe)
	return cmd
}

// checkScheduleStore refuses, before Temporal is dialed, an ensure --target of a store that
// does not exist at --storage ($WALKEEPER_STORAGE, else a running dev's), and one with no
// storage to check: unlike a merge, whose run fails once, the schedule would start a merge of
// a mistyped store that fails every --every for ever. --storage without --target names no store.
func (g *globalOptions) checkScheduleStore(cmd *cobra.Command, sf *scheduleFlags, t store.Target, dev devState) error {
	if sf.target == "" {
		if cmd.Flags().Changed("storage") {
			return cli.Usagef("--storage: the sweep schedule names no store to check; it goes with --target")
		}
		return nil
	}
	if sf.storage == "" && dev.Storage == "" {
		return cli.Usagef("--target %s: pass --storage URL (or set WALKEEPER_STORAGE, or run 'walkeeper dev') "+
			"to check that the store exists", t)
	}
	return g.precheckStore(cmd.Context(), sf.storage, dev, t)
}

func printSchedule(out io.Writer, id string, d *client.ScheduleDescription) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "schedule\t%s\n", id)
	if a, ok := d.Schedule.Action.(*client.ScheduleWorkflowAction); ok {
		if s, ok := a.Workflow.(string); ok {
			fmt.Fprintf(tw, "action\tworkflow %s on task queue %s (ID prefix %s)\n", s, a.TaskQueue, a.ID)
			if in, ok := temporaladmin.SweepWindowInputOf(d); ok {
				fmt.Fprintf(tw, "sweep\ta round every %s, windows of %s\n", in.Interval, in.Window)
			}
		} else {
			fmt.Fprintf(tw, "action\tworkflow on task queue %s (ID prefix %s)\n", a.TaskQueue, a.ID)
		}
	}
	if sp := d.Schedule.Spec; sp != nil {
		var parts []string
		for _, iv := range sp.Intervals {
			p := "every " + iv.Every.String()
			if iv.Offset > 0 {
				p += " offset " + iv.Offset.String()
			}
			parts = append(parts, p)
		}
		parts = append(parts, sp.CronExpressions...)
		if sp.Jitter > 0 {
			parts = append(parts, "jitter up to "+sp.Jitter.String())
		}
		for range sp.Calendars {
			parts = append(parts, "calendar")
		}
		fmt.Fprintf(tw, "spec\t%s\n", dash(strings.Join(parts, "; ")))
	}
	if p := d.Schedule.Policy; p != nil {
		fmt.Fprintf(tw, "overlap\t%s\n", p.Overlap.String())
		fmt.Fprintf(tw, "catch-up window\t%s\n", p.CatchupWindow)
	}
	if s := d.Schedule.State; s != nil {
		state := "active"
		if s.Paused {
			state = "paused"
		}
		fmt.Fprintf(tw, "state\t%s\n", state)
		fmt.Fprintf(tw, "note\t%s\n", dash(s.Note))
	}
	fmt.Fprintf(tw, "actions taken\t%d (skipped for overlap %d, missed catch-up window %d)\n",
		d.Info.NumActions, d.Info.NumActionsSkippedOverlap, d.Info.NumActionsMissedCatchupWindow)
	for _, r := range d.Info.RunningWorkflows {
		fmt.Fprintf(tw, "running\t%s (run %s)\n", r.WorkflowID, r.FirstExecutionRunID)
	}
	for _, r := range d.Info.RecentActions[max(0, len(d.Info.RecentActions)-5):] {
		wf := "-"
		if r.StartWorkflowResult != nil {
			wf = r.StartWorkflowResult.WorkflowID
		}
		fmt.Fprintf(tw, "recent\t%s %s\n", r.ActualTime.Local().Format(time.RFC3339), wf)
	}
	for _, t := range d.Info.NextActionTimes[:min(3, len(d.Info.NextActionTimes))] {
		fmt.Fprintf(tw, "next\t%s\n", t.Local().Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "created\t%s\n", d.Info.CreatedAt.Local().Format(time.RFC3339))
	return tw.Flush()
}
