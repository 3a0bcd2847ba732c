package worker

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/walkeeper/walkeeper/activities"
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/temporaladmin"
)

// KnobInfo describes one knob for documentation.
type KnobInfo struct {
	Flag    string // command-line flag without dashes
	Env     string // environment variable
	Type    string // string, int, bytes, duration, bool
	Default string // documented default
	Usage   string
}

// Knobs lists every knob in documentation order.
func Knobs() []KnobInfo {
	d := DefaultConfig()
	d.Instance = "host name" // not the name of the machine that renders the docs
	out := make([]KnobInfo, 0, len(knobs))
	for _, k := range knobs {
		out = append(out, KnobInfo{Flag: k.Flag, Env: k.env(), Type: k.typ, Default: k.get(&d), Usage: k.Usage})
	}
	return out
}

// knob is one configuration entry, the one source of its flag name, environment name,
// default and help text, from which the worker's flags, the client commands' Temporal flags
// and docs/CONFIG.md are all generated.
type knob struct {
	Flag   string
	Usage  string
	Secret bool // --help leaves out its value, which may come from the environment
	// nonNegative: Validate refuses a value below 0 ("must not be negative").
	nonNegative bool
	// field is the knob's Config field; of a TemporalConfig field it only reads the value
	// through Config.Temporal (its documented default).
	field[Config]
	// temporal, set for a TemporalConfig field, reaches it in every command's flags.
	temporal *field[TemporalConfig]
}

func (k knob) env() string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(k.Flag, "-", "_"))
}

// usage is the flag's help text: the knob's, with its environment variable.
func (k knob) usage() string { return k.Usage + " (env " + k.env() + ")" }

// lookupKnob returns the knob named flag.
func lookupKnob(flag string) (knob, bool) {
	for _, k := range knobs {
		if k.Flag == flag {
			return k, true
		}
	}
	return knob{}, false
}

// workerKnob is a knob of a Config field.
func workerKnob(flag, usage string, f field[Config]) knob {
	return knob{Flag: flag, Usage: usage, field: f}
}

// temporalKnob is a knob of a TemporalConfig field.
func temporalKnob(flag, usage string, f field[TemporalConfig]) knob {
	return knob{Flag: flag, Usage: usage, temporal: &f,
		field: field[Config]{typ: f.typ, get: func(c *Config) string { return f.get(&c.Temporal) }}}
}

// nonNegative is k with a value below 0 refused by Validate; a knob with a range of its own
// checks it there instead.
func nonNegative(k knob) knob {
	k.nonNegative = true
	return k
}

// secret is k with its value kept out of --help.
func secret(k knob) knob {
	k.Secret = true
	return k
}

// field reads and writes one typed field of an owner struct (Config or TemporalConfig) as
// text; set reports a value that does not parse and leaves the field alone.
type field[O any] struct {
	typ   string
	get   func(*O) string
	set   func(*O, string) error
	reset func(*O) // sets the field to its default
}

// typedField is the field p points to, printed by format, read by parse and def by default.
func typedField[O, T any](typ string, p func(*O) *T, def T, format func(T) string, parse func(string) (T, error)) field[O] {
	return field[O]{typ: typ,
		reset: func(o *O) { *p(o) = def },
		get:   func(o *O) string { return format(*p(o)) },
		set: func(o *O, s string) error {
			v, err := parse(s)
			if err != nil {
				return err
			}
			*p(o) = v
			return nil
		}}
}

func strField[O any](p func(*O) *string, def string) field[O] {
	return typedField("string", p, def, func(s string) string { return s }, func(s string) (string, error) { return s, nil })
}

func boolField[O any](p func(*O) *bool, def bool) field[O] {
	return typedField("bool", p, def, strconv.FormatBool, parseBool)
}

func intField[O any](p func(*O) *int, def int) field[O] {
	return typedField("int", p, def, strconv.Itoa, func(s string) (int, error) {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return 0, fmt.Errorf("not an integer")
		}
		return v, nil
	})
}

func bytesField[O any](p func(*O) *int64, def int64) field[O] {
	return typedField("bytes", p, def, FormatBytes, ParseBytes)
}

func bytesIntField[O any](p func(*O) *int, def int) field[O] {
	return typedField("bytes", p, def, func(v int) string { return FormatBytes(int64(v)) }, func(s string) (int, error) {
		v, err := ParseBytes(s)
		if err != nil {
			return 0, err
		}
		if v > math.MaxInt32 || v < math.MinInt32 {
			return 0, fmt.Errorf("%q is out of range", s)
		}
		return int(v), nil
	})
}

func durField[O any](p func(*O) *time.Duration, def time.Duration) field[O] {
	return typedField("duration", p, def, time.Duration.String, ParseDuration)
}

// weightsField is a FairnessWeights knob, "kind=weight,..." (contract.ParseFairnessWeights).
func weightsField[O any](p func(*O) *contract.FairnessWeights, def contract.FairnessWeights) field[O] {
	return typedField("string", p, def, contract.FairnessWeights.String, contract.ParseFairnessWeights)
}

// storeDefaults are the store's defaults, which the knobs of store options take.
var storeDefaults = store.DefaultOptions()

var knobs = []knob{
	workerKnob("instance", "stable instance id of this process; the shard id derives from it", strField(func(c *Config) *string { return &c.Instance }, "")),
	workerKnob("storage", "storage root URL: file://, mem://, s3://, gs://, azblob://", strField(func(c *Config) *string { return &c.Storage }, "file://./walkeeper-data/storage")),
	temporalKnob("temporal", "Temporal frontend host:port", strField(func(c *TemporalConfig) *string { return &c.HostPort }, temporaladmin.DefaultHostPort)),
	temporalKnob("namespace", "Temporal namespace", strField(func(c *TemporalConfig) *string { return &c.Namespace }, temporaladmin.DefaultNamespace)),
	temporalKnob("temporal-tls", "use TLS to reach Temporal (implied by the TLS file flags, a server name and an API key)", boolField(func(c *TemporalConfig) *bool { return &c.TLS }, false)),
	temporalKnob("temporal-tls-cert", "client certificate (PEM file) for mTLS to Temporal", strField(func(c *TemporalConfig) *string { return &c.TLSCert }, "")),
	temporalKnob("temporal-tls-key", "client key (PEM file) for mTLS to Temporal", strField(func(c *TemporalConfig) *string { return &c.TLSKey }, "")),
	temporalKnob("temporal-tls-ca", "CA bundle (PEM file) to verify the Temporal server", strField(func(c *TemporalConfig) *string { return &c.TLSCA }, "")),
	temporalKnob("temporal-tls-server-name", "TLS server name override for Temporal", strField(func(c *TemporalConfig) *string { return &c.TLSServerName }, "")),
	secret(temporalKnob("temporal-api-key", "Temporal API key (e.g. Temporal Cloud); implies TLS", strField(func(c *TemporalConfig) *string { return &c.APIKey }, ""))),
	workerKnob("listen", "HTTP data-plane listen address", strField(func(c *Config) *string { return &c.Listen }, "127.0.0.1:8080")),
	secret(workerKnob("auth-token", "bearer token required on every HTTP route but /healthz (empty = no auth)", strField(func(c *Config) *string { return &c.AuthToken }, ""))),
	workerKnob("merge-slots", "concurrent Prepare activities on this worker's shard queue", intField(func(c *Config) *int { return &c.MergeSlots }, 4)),
	workerKnob("shared-activity-slots", "concurrent activities on the shared queue \"walkeeper\"", intField(func(c *Config) *int { return &c.SharedActivitySlots }, 8)),
	nonNegative(workerKnob("merge-budget-bytes", "process-wide merge memory budget shared by every merge (0 = unlimited)", bytesField(func(c *Config) *int64 { return &c.MergeBudgetBytes }, store.DefaultMergeBudgetBytes))),
	nonNegative(workerKnob("read-budget-bytes", "shared by concurrent reads for the files they decode outside the cache; a read that cannot fit within 2s gets 503 budget_busy (0 = unlimited)", bytesField(func(c *Config) *int64 { return &c.ReadBudgetBytes }, 256<<20))),
	nonNegative(workerKnob("memory-limit", "Go soft memory limit (debug.SetMemoryLimit) of the Go heap; 0 = cache-bytes + read-budget-bytes + 512MiB (merge buffers live outside the Go heap), none when the merge budget is unlimited or GOMEMLIMIT is set", bytesField(func(c *Config) *int64 { return &c.MemoryLimitBytes }, 0))),
	nonNegative(workerKnob("merge-max-generations", "generations one merge pass takes at most (0 = no cap but the store's 10,000)", intField(func(c *Config) *int { return &c.MergeMaxGenerations }, storeDefaults.MergeMaxGenerations))),
	nonNegative(workerKnob("merge-max-bytes", "bytes one merge pass reads at most, checked at generation boundaries (0 = only the merge budget caps it)", bytesField(func(c *Config) *int64 { return &c.MergeMaxBytes }, storeDefaults.MergeMaxBytes))),
	nonNegative(workerKnob("merge-after-generations", "count trigger: after a seal, start MergeWal when the own shard has this many pending generations (0 = off)", intField(func(c *Config) *int { return &c.MergeAfterGenerations }, 50))),
	workerKnob("merge-parallel-prepare", "count trigger: ask MergeWal to prepare the passes of different shards in parallel (commits stay one at a time)", boolField(func(c *Config) *bool { return &c.MergeParallelPrepare }, true)),
	workerKnob("merge-prepare-concurrency", "count trigger: prepares of different shards one MergeWal runs at once with parallel prepares (0 = 4, at most 64)", intField(func(c *Config) *int { return &c.MergePrepareConcurrency }, 0)),
	workerKnob("merge-shards-per-commit", "count trigger: shards whose passes one MergeWal commit publishes in one base version (0 = 64, 1 = one shard per commit, at most 64)", intField(func(c *Config) *int { return &c.MergeShardsPerCommit }, 0)),
	workerKnob("fairness-weights", "each kind's share of the merge task queues under Temporal fairness, kind=weight[,...]; a kind not listed weighs 1, a weight is 0.001 to 1000 (docs/OPERATIONS.md \"Fair share across kinds\")", weightsField(func(c *Config) *contract.FairnessWeights { return &c.FairnessWeights }, nil)),
	workerKnob("fairness-probe", "at start, probe whether the Temporal server dispatches by fairness key (80 short workflow starts on a task queue of their own, 160 when a first round is not mostly fair, as on every FIFO server) and warn, with walkeeper_temporal_fairness 0, when it does not", boolField(func(c *Config) *bool { return &c.FairnessProbe }, true)),
	workerKnob("sticky-workflows", "keep the SDK's sticky workflow execution; off, every workflow task is dispatched by fairness key through the shared queue and replays its run's history (docs/OPERATIONS.md \"Fair share across kinds\")", boolField(func(c *Config) *bool { return &c.StickyWorkflows }, true)),
	nonNegative(workerKnob("flush-interval", "flush sweeper period: seal every resident store with a writer in this process (0 = off)", durField(func(c *Config) *time.Duration { return &c.FlushInterval }, 5*time.Second))),
	nonNegative(workerKnob("flush-timeout", "per-store seal timeout in a sweep (0 = max(5 × flush-interval, 30s))", durField(func(c *Config) *time.Duration { return &c.FlushTimeout }, 0))),
	nonNegative(workerKnob("storage-stall-timeout", "a storage request (get, put, list, …) that moves no byte and gets no answer for this long fails, and its seal or merge step is retried (0 = 2m; at least 1s)", durField(func(c *Config) *time.Duration { return &c.StorageStallTimeout }, 0))),
	nonNegative(workerKnob("pending-warn", "warn when a read unions this many pending generations in one shard (0 = off)", intField(func(c *Config) *int { return &c.PendingWarn }, storeDefaults.PendingWarn))),
	nonNegative(workerKnob("pending-max", "refuse reads above this many pending generations (one shard or total), and appends and deletes to an own shard at it, where its seals stop too (0 = off)", intField(func(c *Config) *int { return &c.PendingMax }, storeDefaults.PendingMax))),
	workerKnob("max-body-bytes", "largest HTTP request body", bytesField(func(c *Config) *int64 { return &c.MaxBodyBytes }, 8<<20)),
	workerKnob("body-budget-bytes", "request bodies being read and decoded at once, shared by every request; a body that cannot get its bytes within 2s gets 503 budget_busy (0 = unlimited, else at least max-body-bytes)", bytesField(func(c *Config) *int64 { return &c.BodyBudgetBytes }, 64<<20)),
	nonNegative(workerKnob("max-row-bytes", "largest row, measured as its JSON text (0 = no cap)", bytesIntField(func(c *Config) *int { return &c.MaxRowBytes }, storeDefaults.MaxRowBytes))),
	workerKnob("page-bytes", "a page of GET .../rows or GET /api/v1/stores stops before its answer exceeds this many bytes (it always holds one item) and carries next", bytesField(func(c *Config) *int64 { return &c.PageBytes }, 4<<20)),
	workerKnob("page-budget-bytes", "list pages (GET .../rows and GET /api/v1/stores) and rows (GET .../rows/{id}) being read and written at once, shared by every request: a rows page takes page-bytes plus one row of max-row-bytes (less for a small ?limit=), a row one row of max-row-bytes, a stores page takes page-bytes plus one 384-byte entry (less for a small ?limit=); one that cannot get its bytes within 2s gets 503 budget_busy (0 = unlimited, else at least page-bytes + max-row-bytes, and page-bytes + 384)", bytesField(func(c *Config) *int64 { return &c.PageBudgetBytes }, 64<<20)),
	nonNegative(workerKnob("http-read-timeout", "bound on reading one whole HTTP request, body included (0 = none)", durField(func(c *Config) *time.Duration { return &c.HTTPReadTimeout }, 30*time.Second))),
	nonNegative(workerKnob("http-write-timeout", "bound on writing one HTTP answer, counted from the end of its request's headers; POST .../merge-wal?wait=true counts it from the end of its wait (0 = none)", durField(func(c *Config) *time.Duration { return &c.HTTPWriteTimeout }, 60*time.Second))),
	nonNegative(workerKnob("max-connections", "open HTTP connections at most; more wait to be accepted (0 = no cap)", intField(func(c *Config) *int { return &c.MaxConnections }, 1024))),
	nonNegative(workerKnob("max-append-rows", "rows one append may carry; more is 413 append_too_large (0 = no cap)", intField(func(c *Config) *int { return &c.MaxAppendRows }, storeDefaults.MaxAppendRows))),
	workerKnob("memtable-bytes", "an active memtable is sealed when its decoded rows reach this; an append whose decoded rows alone are more is 413 append_too_large; appends in flight share twice this; a WAL object holds at most this of decoded rows, a group commit of more is written as several; a store whose memtables hold four times this, because its seals fail, refuses appends with 503 budget_busy", bytesField(func(c *Config) *int64 { return &c.MemtableBytes }, storeDefaults.MemtableBytes)),
	nonNegative(workerKnob("group-commit-wait", "how long the WAL committer lingers for more appends (0 = batch what queued during the previous write)", durField(func(c *Config) *time.Duration { return &c.GroupCommitWait }, storeDefaults.GroupCommitWait))),
	nonNegative(workerKnob("group-commit-max-rows", "rows per WAL object at most; a WAL object longer than 2 × memtable-bytes + this × 5,176 bytes + 1 MiB (177,668,096 bytes with the defaults, what any build could write with these settings) is refused as damaged without being read", intField(func(c *Config) *int { return &c.GroupCommitMaxRows }, storeDefaults.GroupCommitMaxRows))),
	nonNegative(workerKnob("cache-bytes", "decoded generations and base runs kept in memory for reads", bytesField(func(c *Config) *int64 { return &c.CacheBytes }, storeDefaults.CacheBytes))),
	nonNegative(workerKnob("resident-stores-max", "stores kept open at most; opening one more evicts the least recently used (memtable sealed, writer stopped; reopened on its next request) (0 = no cap)", intField(func(c *Config) *int { return &c.ResidentStoresMax }, storeDefaults.ResidentStoresMax))),
	nonNegative(workerKnob("resident-idle", "evict an open store not used for this long: memtable sealed, writer stopped, reopened on its next request (0 = never)", durField(func(c *Config) *time.Duration { return &c.ResidentIdle }, storeDefaults.ResidentIdle))),
	nonNegative(workerKnob("sweep-interval", "time between two sweep rounds of the Temporal schedule walkeeper-sweep ensured on start (0 = leave it alone; else 1s to 24h)", durField(func(c *Config) *time.Duration { return &c.SweepInterval }, time.Minute))),
	nonNegative(workerKnob("sweep-window", "how long one SweepWindow workflow runs sweep rounds (1s to 24h); the schedule walkeeper-sweep starts one per window, so rounds that start nothing leave no workflow behind", durField(func(c *Config) *time.Duration { return &c.SweepWindow }, temporaladmin.DefaultSweepWindow))),
	nonNegative(workerKnob("sweep-jitter", "random delay of each scheduled sweep window, at most this and at most a quarter of sweep-window (0 = none)", durField(func(c *Config) *time.Duration { return &c.SweepJitter }, 5*time.Second))),
	workerKnob("sweep-merge-min-generations", "the sweep starts MergeWal for a store with at least this many pending generations (1 to 100000); a merge costs the same Temporal actions whatever it folds, so higher is fewer, cheaper merges for more debt", intField(func(c *Config) *int { return &c.SweepMergeMinGenerations }, contract.DefaultSweepMergeMinGenerations)),
	workerKnob("sweep-max-starts", "most workflows one sweep round starts, most indebted first (the demand index is paged until it is reached)", intField(func(c *Config) *int { return &c.SweepMaxStarts }, contract.DefaultSweepMaxStarts)),
	workerKnob("sweep-start-batch", "workflow starts per StartWorkflows activity of one sweep (at most 512)", intField(func(c *Config) *int { return &c.SweepStartBatch }, contract.DefaultSweepStartBatch)),
	nonNegative(workerKnob("sweep-start-spacing", "least time between two start batches of one sweep, so a big sweep is not one burst (0 = no pacing; else 10ms to 1m)", durField(func(c *Config) *time.Duration { return &c.SweepStartSpacing }, time.Second))),
	workerKnob("sweep-start-concurrency", "workflow starts one StartWorkflows activity of this worker has in flight (1 to 256); a sweep runs up to 4 such activities at once", intField(func(c *Config) *int { return &c.SweepStartConcurrency }, activities.DefaultStartConcurrency)),
	workerKnob("merge-run-timeout", "run timeout of every MergeWal and CompactBase this worker starts (count trigger, HTTP, sweep, schedules; 10s to 168h): a run that cannot finish is ended and the next trigger starts a fresh one; a run started without one is terminated by the stuck-run scan past it", durField(func(c *Config) *time.Duration { return &c.MergeRunTimeout }, contract.DefaultMergeRunTimeout)),
	workerKnob("stuck-scan-interval", "how often this worker looks for MergeWal and CompactBase runs that cannot make progress (failing workflow task, activity retrying, past merge-run-timeout): one visibility page and at most 100 describes a scan (0 = off; else 1s to 1h)", durField(func(c *Config) *time.Duration { return &c.StuckScanInterval }, time.Minute)),
	nonNegative(workerKnob("workflow-deadlock-timeout", "how long a workflow task may run without yielding before the Temporal SDK fails it as a potential deadlock and the server retries it (0 = the SDK's 1 s); raise it on a starved CPU, where tasks trip it without a bug", durField(func(c *Config) *time.Duration { return &c.WorkflowDeadlock }, 0))),
	nonNegative(workerKnob("reconcile-interval", "period of the Temporal schedule walkeeper-reconcile (ReconcileDemand: page through the registry, repair the demand index) ensured on start (0 = leave it alone; else at least 1s)", durField(func(c *Config) *time.Duration { return &c.ReconcileInterval }, time.Hour))),
	nonNegative(workerKnob("compact-demand-runs", "a merge commit that leaves this many base runs marks the store for compaction in the demand index, which the sweep reads (0 = never mark, and a compaction or the reconcile deletes a mark left from before)", intField(func(c *Config) *int { return &c.CompactDemandRuns }, storeDefaults.CompactDemandRuns))),
	workerKnob("log-format", "log encoding: json or console", strField(func(c *Config) *string { return &c.LogFormat }, LogFormatJSON)),
	workerKnob("log-level", "log level: debug, info, warn, error", strField(func(c *Config) *string { return &c.LogLevel }, "info")),
	nonNegative(workerKnob("shutdown-timeout", "bound on graceful shutdown (HTTP drain, activity drain, final seal)", durField(func(c *Config) *time.Duration { return &c.ShutdownTimeout }, 30*time.Second))),
}

// byteUnits are the suffixes ParseBytes accepts, longest first.
var byteUnits = []struct {
	suffix string
	mult   int64
}{
	{"TIB", 1 << 40}, {"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10},
	{"TI", 1 << 40}, {"GI", 1 << 30}, {"MI", 1 << 20}, {"KI", 1 << 10},
	{"B", 1},
}

// ParseBytes reads a byte size: a plain integer or one with a binary suffix
// (KiB, MiB, GiB, TiB; "Ki"… and case are accepted).
func ParseBytes(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte size (e.g. 1048576 or 1MiB)", s)
	}
	if v != 0 && (v > (1<<63-1)/mult || v < -(1<<63-1)/mult) {
		return 0, fmt.Errorf("%q overflows", s)
	}
	return v * mult, nil
}

// FormatBytes prints a size with the largest exact binary suffix.
func FormatBytes(v int64) string {
	for _, u := range byteUnits[:4] {
		if v != 0 && v%u.mult == 0 {
			return strconv.FormatInt(v/u.mult, 10) + u.suffix[:1] + "iB"
		}
	}
	return strconv.FormatInt(v, 10)
}

// ParseDuration reads a Go duration ("5s", "2m30s") or plain seconds ("30").
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if n, err := strconv.ParseInt(t, 10, 64); err == nil {
		const most = int64(math.MaxInt64 / time.Second)
		if n > most || n < -most { // the product would wrap to an unrelated duration
			return 0, fmt.Errorf("%q seconds is out of range (at most %d)", s, most)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (e.g. 5s, 2m, or plain seconds)", s)
	}
	return d, nil
}

// parseBool accepts strconv.ParseBool's spellings plus yes/no and on/off.
func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "yes", "on":
		return true, nil
	case "no", "off":
		return false, nil
	}
	v, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return false, fmt.Errorf("%q is not a boolean", s)
	}
	return v, nil
}
