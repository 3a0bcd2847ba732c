package worker

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/target"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// EnvPrefix prefixes every knob's environment variable (--merge-slots: WALKEEPER_MERGE_SLOTS).
const EnvPrefix = "WALKEEPER_"

// Config holds every knob of a worker process; start from DefaultConfig. Each field's flag,
// environment variable and meaning are its entry in the knob table (config_knobs.go).
type Config struct {
	Instance string
	Storage  string

	Temporal TemporalConfig

	Listen    string
	AuthToken string

	MergeSlots              int
	SharedActivitySlots     int
	MergeBudgetBytes        int64
	ReadBudgetBytes         int64
	MemoryLimitBytes        int64 // 0: DerivedMemoryLimit
	MergeMaxGenerations     int
	MergeMaxBytes           int64
	MergeAfterGenerations   int
	MergeParallelPrepare    bool
	MergeShardsPerCommit    int
	MergePrepareConcurrency int
	// FairnessWeights ride every MergeWal this worker starts, its activities' starts included.
	FairnessWeights contract.FairnessWeights
	FairnessProbe   bool
	StickyWorkflows bool

	FlushInterval       time.Duration
	FlushTimeout        time.Duration // 0: max(5 × FlushInterval, 30s)
	StorageStallTimeout time.Duration
	PendingWarn         int
	PendingMax          int

	MaxBodyBytes     int64
	BodyBudgetBytes  int64
	MaxRowBytes      int
	PageBytes        int64
	PageBudgetBytes  int64
	HTTPReadTimeout  time.Duration
	HTTPWriteTimeout time.Duration
	MaxConnections   int
	MaxAppendRows    int
	MemtableBytes    int64

	GroupCommitWait    time.Duration
	GroupCommitMaxRows int
	CacheBytes         int64
	ResidentStoresMax  int
	ResidentIdle       time.Duration

	SweepInterval            time.Duration // 0: leave the schedule walkeeper-sweep alone
	SweepWindow              time.Duration
	ReconcileInterval        time.Duration // 0: leave the schedule walkeeper-reconcile alone
	CompactDemandRuns        int
	SweepJitter              time.Duration
	SweepMergeMinGenerations int
	SweepMaxStarts           int
	SweepStartBatch          int
	SweepStartSpacing        time.Duration
	SweepStartConcurrency    int

	MergeRunTimeout   time.Duration
	StuckScanInterval time.Duration // 0: no stuck-run scan
	WorkflowDeadlock  time.Duration

	LogFormat string
	LogLevel  string
	// ShutdownTimeout bounds Stop when its context has no deadline.
	ShutdownTimeout time.Duration

	envErrs envErrors // reported by Validate (config_flags.go)
}

// minFlushTimeout is the floor of the default --flush-timeout, max(5 × flush-interval, 30s).
const minFlushTimeout = 30 * time.Second

// DefaultConfig returns the documented defaults, each its knob's (config_knobs.go); Instance
// defaults to the host name.
func DefaultConfig() Config {
	c := Config{Temporal: DefaultTemporalConfig()}
	for _, k := range knobs {
		if k.temporal == nil {
			k.reset(&c)
		}
	}
	c.Instance = "default"
	if h, err := os.Hostname(); err == nil && h != "" {
		c.Instance = h
	}
	return c
}

// StoreOptions returns the store.Options this configuration implies. Logger, Metrics and
// Budget are left for the caller (the Worker sets them).
func (c *Config) StoreOptions() store.Options {
	o := store.DefaultOptions()
	o.InstanceID = c.Instance
	o.MergeMaxGenerations = c.MergeMaxGenerations
	o.MergeMaxBytes = c.MergeMaxBytes
	o.PendingWarn = c.PendingWarn
	o.PendingMax = c.PendingMax
	o.MaxRowBytes = c.MaxRowBytes
	o.MaxAppendRows = c.MaxAppendRows
	o.MemtableBytes = c.MemtableBytes
	o.GroupCommitWait = c.GroupCommitWait
	o.GroupCommitMaxRows = c.GroupCommitMaxRows
	o.CacheBytes = c.CacheBytes
	o.ResidentStoresMax = c.ResidentStoresMax
	o.ResidentIdle = c.ResidentIdle
	if c.ReadBudgetBytes > 0 {
		o.ReadBudget = store.NewBudget(c.ReadBudgetBytes)
	}
	o.CompactDemandRuns = c.CompactDemandRuns
	o.StorageStallTimeout = c.StorageStallTimeout
	return o
}

// rowsPageBytes is what a GET .../rows page of at most limit rows takes from
// --page-budget-bytes: --page-bytes plus the row that reaches it, or limit rows when less
// (--page-bytes alone when --max-row-bytes 0 leaves a row unbounded).
func (c *Config) rowsPageBytes(limit int) int64 {
	if c.MaxRowBytes <= 0 {
		return c.PageBytes
	}
	row := int64(c.MaxRowBytes)
	return min(c.PageBytes+row, int64(limit)*row)
}

// storesPageBytes is what a GET /api/v1/stores page of at most limit stores takes from
// --page-budget-bytes, as rowsPageBytes is for rows.
func (c *Config) storesPageBytes(limit int) int64 {
	return min(c.PageBytes+store.MaxStoreInfoJSONBytes, int64(limit)*store.MaxStoreInfoJSONBytes)
}

// Validate reports every problem at once: unparsed environment values and knobs out of range.
func (c *Config) Validate() error {
	errs := c.envErrs.sorted()
	bad := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flag, fmt.Sprintf(format, args...)))
	}
	if strings.TrimSpace(c.Instance) == "" {
		bad("instance", "must not be empty")
	}
	if c.Storage == "" {
		bad("storage", "must not be empty")
	} else if !strings.Contains(c.Storage, "://") {
		bad("storage", "%q is not a URL (file://, mem://, s3://, gs://, azblob://)", c.Storage)
	}
	if c.Temporal.Namespace == "" {
		bad("namespace", "must not be empty")
	}
	errs = append(errs, c.Temporal.Validate())
	if err := checkHostPort(c.Listen, 0); err != nil {
		bad("listen", "%v", err)
	}
	if strings.ContainsAny(c.AuthToken, " \t\r\n") {
		bad("auth-token", "must not contain white space")
	}
	// within reports v outside lo..hi, and whether it was inside.
	within := func(flag string, v, lo, hi int) bool {
		if v < lo || v > hi {
			bad(flag, "must be %d to %d, got %d", lo, hi, v)
		}
		return v >= lo && v <= hi
	}
	if c.MergeSlots < 1 {
		bad("merge-slots", "must be at least 1, got %d", c.MergeSlots)
	}
	if c.SharedActivitySlots < 1 {
		bad("shared-activity-slots", "must be at least 1, got %d", c.SharedActivitySlots)
	}
	// Knobs that become inputs of workflows the worker starts itself (the count trigger's
	// MergeWal, the SweepWindow of the schedule walkeeper-sweep) are held to those inputs'
	// bounds, so a misconfigured worker fails at start instead of starting runs that fail.
	within("merge-prepare-concurrency", c.MergePrepareConcurrency, 0, contract.MaxPrepareConcurrency)
	if err := contract.CheckMergeRunTimeout(c.MergeRunTimeout); err != nil {
		bad("merge-run-timeout", "%v", err)
	}
	if s := c.StuckScanInterval; s != 0 && (s < MinStuckScanInterval || s > MaxStuckScanInterval) {
		bad("stuck-scan-interval", "must be 0 (off) or %s to %s, got %s", MinStuckScanInterval, MaxStuckScanInterval, s)
	}
	if c.SweepInterval > 0 { // else no schedule is ensured
		if c.SweepInterval < contract.MinSweepInterval || c.SweepInterval > contract.MaxSweepInterval {
			bad("sweep-interval", "must be 0 (leave the schedule alone) or %s to %s, got %s",
				contract.MinSweepInterval, contract.MaxSweepInterval, c.SweepInterval)
		}
		if c.SweepWindow > 0 && (c.SweepWindow < contract.MinSweepWindow || c.SweepWindow > contract.MaxSweepWindow) {
			bad("sweep-window", "must be %s to %s, got %s", contract.MinSweepWindow, contract.MaxSweepWindow, c.SweepWindow)
		}
		if s := c.SweepStartSpacing; s > 0 && (s < contract.MinSweepStartSpacing || s > contract.MaxSweepStartSpacing) {
			bad("sweep-start-spacing", "must be 0 (no pacing) or %s to %s, got %s",
				contract.MinSweepStartSpacing, contract.MaxSweepStartSpacing, s)
		}
	}
	if r := c.ReconcileInterval; r > 0 && r < temporaladmin.MinScheduleInterval {
		// Temporal refuses the schedule: the reconcile would never be ensured.
		bad("reconcile-interval", "must be 0 (leave the schedule alone) or at least %s, got %s", temporaladmin.MinScheduleInterval, r)
	}
	within("merge-shards-per-commit", c.MergeShardsPerCommit, 0, contract.MaxRoundShards)
	for _, k := range knobs {
		// Every numeric knob's text, as --help prints it, starts with "-" when it is negative.
		if k.nonNegative && strings.HasPrefix(k.get(c), "-") {
			bad(k.Flag, "must not be negative")
		}
	}
	switch { // the first knob out of range is reported, and the history bound needs them all in range
	case !within("sweep-start-batch", c.SweepStartBatch, 1, contract.MaxStartBatch),
		!within("sweep-start-concurrency", c.SweepStartConcurrency, 1, activities.MaxStartConcurrency),
		!within("sweep-merge-min-generations", c.SweepMergeMinGenerations, 1, contract.MaxSweepMergeMinGenerations),
		!within("sweep-max-starts", c.SweepMaxStarts, 1, contract.MaxSweepStarts):
	default:
		if n := contract.SweepHistoryBound(len(target.Kinds), c.SweepMaxStarts, c.SweepStartBatch); n > contract.MaxSweepEvents {
			bad("sweep-max-starts", "%d starts in batches of %d could add %d events to a sweep's history, at most %d: raise --sweep-start-batch",
				c.SweepMaxStarts, c.SweepStartBatch, n, contract.MaxSweepEvents)
		}
	}
	if c.StorageStallTimeout > 0 && c.StorageStallTimeout < minStorageStallTimeout {
		// Below a second an ordinary round trip would count as a stall and every seal, read
		// and merge step would fail.
		bad("storage-stall-timeout", "must be 0 (2m) or at least %s, got %s", minStorageStallTimeout, c.StorageStallTimeout)
	}
	if c.MaxBodyBytes < 1 {
		bad("max-body-bytes", "must be positive, got %d", c.MaxBodyBytes)
	}
	if c.BodyBudgetBytes != 0 && c.BodyBudgetBytes < c.MaxBodyBytes {
		bad("body-budget-bytes", "must be 0 (unlimited) or at least --max-body-bytes (%d), got %d", c.MaxBodyBytes, c.BodyBudgetBytes)
	}
	if c.PageBytes < 1 {
		bad("page-bytes", "must be positive, got %d", c.PageBytes)
	} else if most := max(c.rowsPageBytes(maxListLimit), c.storesPageBytes(maxStoresLimit)); c.PageBudgetBytes != 0 && c.PageBudgetBytes < most {
		bad("page-budget-bytes", "must be 0 (unlimited) or at least --page-bytes plus --max-row-bytes or plus %d bytes, whichever is more (%d), got %d",
			store.MaxStoreInfoJSONBytes, most, c.PageBudgetBytes)
	}
	if c.MemtableBytes < 1 {
		bad("memtable-bytes", "must be positive, got %d", c.MemtableBytes)
	}
	if c.PendingWarn > 0 && c.PendingMax > 0 && c.PendingWarn > c.PendingMax {
		bad("pending-warn", "%d is above --pending-max %d", c.PendingWarn, c.PendingMax)
	}
	if c.MergeAfterGenerations > 0 && c.PendingMax > 0 && c.MergeAfterGenerations > c.PendingMax {
		// A shard's seals stop at --pending-max, so its pending count never reaches the trigger.
		bad("merge-after-generations", "%d is above --pending-max %d: the count trigger would never fire", c.MergeAfterGenerations, c.PendingMax)
	}
	if !slices.Contains([]string{LogFormatJSON, LogFormatConsole}, c.LogFormat) {
		bad("log-format", "%q is not json or console", c.LogFormat)
	}
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.LogLevel) {
		bad("log-level", "%q is not debug, info, warn or error", c.LogLevel)
	}
	return errors.Join(errs...)
}

// minStorageStallTimeout is the least --storage-stall-timeout accepted.
const minStorageStallTimeout = time.Second
