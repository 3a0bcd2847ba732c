package worker

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// EnvPrefix prefixes the environment variable of every knob: flag --merge-slots is read from
// WALKEEPER_MERGE_SLOTS when the flag is not given.
const EnvPrefix = "WALKEEPER_"

// Config holds every knob of a worker process. The zero value is not useful: start from
// DefaultConfig (or ConfigFromEnv) and override. docs/CONFIG.md is generated from Knobs().
type Config struct {
	// Instance is the stable identity of this process; the shard id is derived from it.
	Instance string
	// Storage is the storage root URL (file://, mem://, s3://, gs://, azblob://).
	Storage string

	// Temporal says how to reach Temporal (host:port, namespace, TLS, API key). Its flags are
	// registered by TemporalConfig.RegisterFlags so every command spells them alike.
	Temporal TemporalConfig

	// Listen is the HTTP data-plane address. AuthToken, when set, is the bearer token every
	// route but /healthz requires.
	Listen    string
	AuthToken string

	// MergeSlots bounds concurrent activities on this worker's shard queue (prepare/commit).
	MergeSlots int
	// SharedActivitySlots bounds concurrent activities on the shared queue.
	SharedActivitySlots int
	// MergeBudgetBytes is the process-wide merge memory budget (0 = unlimited).
	MergeBudgetBytes int64
	// MemoryLimitBytes is the Go runtime's soft memory limit (debug.SetMemoryLimit); 0 derives
	// it from the budget and the read cache (see DerivedMemoryLimit).
	MemoryLimitBytes int64
	// MergeMaxGenerations and MergeMaxBytes cap one merge pass (0 = no cap).
	MergeMaxGenerations int
	MergeMaxBytes       int64
	// MergeAfterGenerations is the count trigger: after a seal, start MergeWal when the own
	// shard has at least this many pending generations (0 = off).
	MergeAfterGenerations int
	// MergeParallelPrepare: the count trigger asks MergeWal to prepare different shards'
	// passes in parallel (commits stay one at a time). The sweeper takes its inverse,
	// SweeperOptions.SerialPrepare, whose zero value is this default.
	MergeParallelPrepare bool
	// MergeShardsPerCommit: the count trigger asks MergeWal to publish the prepared passes
	// of up to this many shards in one base version (MergeWalInput.MaxShardsPerCommit:
	// 0 = 32, 1 = one shard per commit).
	MergeShardsPerCommit int

	// FlushInterval is the seal sweeper period (0 = off). FlushTimeout bounds one store's seal
	// in a sweep; 0 means max(5 × FlushInterval, 30s).
	FlushInterval time.Duration
	FlushTimeout  time.Duration

	// PendingWarn logs a warning when a read unions this many pending generations in one
	// shard (0 = off); PendingMax refuses reads above it and appends to a shard at it (0 = off).
	PendingWarn int
	PendingMax  int

	// MaxBodyBytes caps an HTTP request body; MaxRowBytes caps one encoded row (0 = no cap).
	MaxBodyBytes int64
	MaxRowBytes  int

	// GroupCommitWait and GroupCommitMaxRows tune the WAL group commit.
	GroupCommitWait    time.Duration
	GroupCommitMaxRows int
	// CacheBytes bounds decoded generations and runs kept for reads.
	CacheBytes int64

	// SweepInterval is the period of the Temporal schedule "walkeeper-sweep" that the worker
	// ensures on start (0 = leave the schedule alone).
	SweepInterval time.Duration

	// LogFormat is json or console; LogLevel debug, info, warn or error.
	LogFormat string
	LogLevel  string
	// ShutdownTimeout bounds Stop when its context has no deadline.
	ShutdownTimeout time.Duration

	// envErrs holds environment values that did not parse, by flag name; a flag given on the
	// command line clears its entry. Validate reports what is left.
	envErrs map[string]error
}

// Defaults that other code refers to.
const (
	DefaultStorage       = "file://./walkeeper-data/storage"
	DefaultListen        = "127.0.0.1:8080"
	DefaultFlushInterval = 5 * time.Second
	minFlushTimeout      = 30 * time.Second
)

// DefaultConfig returns the documented defaults. Instance defaults to the host name.
func DefaultConfig() Config {
	so := store.DefaultOptions()
	return Config{
		Instance: defaultInstance(),
		Storage:  DefaultStorage,
		Temporal: TemporalConfig{
			HostPort:  DefaultTemporalHostPort,
			Namespace: DefaultTemporalNamespace,
		},
		Listen:                DefaultListen,
		MergeSlots:            4,
		SharedActivitySlots:   8,
		MergeBudgetBytes:      3 << 30,
		MergeMaxGenerations:   so.MergeMaxGenerations,
		MergeMaxBytes:         so.MergeMaxBytes,
		MergeAfterGenerations: 50,
		MergeParallelPrepare:  true,
		FlushInterval:         DefaultFlushInterval,
		PendingWarn:           so.PendingWarn,
		PendingMax:            so.PendingMax,
		MaxBodyBytes:          8 << 20,
		MaxRowBytes:           so.MaxRowBytes,
		GroupCommitWait:       so.GroupCommitWait,
		GroupCommitMaxRows:    so.GroupCommitMaxRows,
		CacheBytes:            so.CacheBytes,
		SweepInterval:         time.Minute,
		LogFormat:             "json",
		LogLevel:              "info",
		ShutdownTimeout:       30 * time.Second,
	}
}

func defaultInstance() string {
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "default"
}

// ConfigFromEnv returns DefaultConfig overridden by every WALKEEPER_* variable that is set.
func ConfigFromEnv() (Config, error) {
	c := DefaultConfig()
	var errs []error
	for _, k := range knobs {
		if v, ok := os.LookupEnv(k.env()); ok {
			if err := k.set(&c, v); err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", k.env(), v, err))
			}
		}
	}
	return c, errors.Join(errs...)
}

// EffectiveFlushTimeout is the per-store timeout of one sweeper seal.
func (c *Config) EffectiveFlushTimeout() time.Duration {
	if c.FlushTimeout > 0 {
		return c.FlushTimeout
	}
	return max(5*c.FlushInterval, minFlushTimeout)
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
	o.GroupCommitWait = c.GroupCommitWait
	o.GroupCommitMaxRows = c.GroupCommitMaxRows
	o.CacheBytes = c.CacheBytes
	return o
}

// Validate reports every problem at once: environment values that did not parse and knob
// values out of range.
func (c *Config) Validate() error {
	var errs []error
	names := make([]string, 0, len(c.envErrs))
	for n := range c.envErrs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		errs = append(errs, c.envErrs[n])
	}
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
	if c.Temporal.HostPort == "" {
		bad("temporal", "must not be empty")
	}
	if c.Temporal.Namespace == "" {
		bad("namespace", "must not be empty")
	}
	if (c.Temporal.TLSCert == "") != (c.Temporal.TLSKey == "") {
		bad("temporal-tls-cert", "--temporal-tls-cert and --temporal-tls-key go together")
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port: %v", c.Listen, err)
	}
	if strings.ContainsAny(c.AuthToken, " \t\r\n") {
		bad("auth-token", "must not contain white space")
	}
	if c.MergeSlots < 1 {
		bad("merge-slots", "must be at least 1, got %d", c.MergeSlots)
	}
	if c.SharedActivitySlots < 1 {
		bad("shared-activity-slots", "must be at least 1, got %d", c.SharedActivitySlots)
	}
	if c.MergeShardsPerCommit < 0 || c.MergeShardsPerCommit > contract.MaxRoundShards {
		bad("merge-shards-per-commit", "must be 0 to %d, got %d", contract.MaxRoundShards, c.MergeShardsPerCommit)
	}
	for _, nv := range []struct {
		flag string
		v    int64
	}{
		{"merge-budget-bytes", c.MergeBudgetBytes},
		{"memory-limit", c.MemoryLimitBytes},
		{"merge-max-generations", int64(c.MergeMaxGenerations)},
		{"merge-max-bytes", c.MergeMaxBytes},
		{"merge-after-generations", int64(c.MergeAfterGenerations)},
		{"flush-interval", int64(c.FlushInterval)},
		{"flush-timeout", int64(c.FlushTimeout)},
		{"pending-warn", int64(c.PendingWarn)},
		{"pending-max", int64(c.PendingMax)},
		{"max-row-bytes", int64(c.MaxRowBytes)},
		{"group-commit-wait", int64(c.GroupCommitWait)},
		{"group-commit-max-rows", int64(c.GroupCommitMaxRows)},
		{"cache-bytes", c.CacheBytes},
		{"sweep-interval", int64(c.SweepInterval)},
		{"shutdown-timeout", int64(c.ShutdownTimeout)},
	} {
		if nv.v < 0 {
			bad(nv.flag, "must not be negative")
		}
	}
	if c.MaxBodyBytes < 1 {
		bad("max-body-bytes", "must be positive, got %d", c.MaxBodyBytes)
	}
	if c.PendingWarn > 0 && c.PendingMax > 0 && c.PendingWarn > c.PendingMax {
		bad("pending-warn", "%d is above --pending-max %d", c.PendingWarn, c.PendingMax)
	}
	switch c.LogFormat {
	case "json", "console":
	default:
		bad("log-format", "%q is not json or console", c.LogFormat)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("log-level", "%q is not debug, info, warn or error", c.LogLevel)
	}
	return errors.Join(errs...)
}

// RegisterFlags adds one flag per knob to fs. Precedence is flag > environment > default:
// environment values are applied to c now (so --help shows them as the default), and a flag
// given on the command line overrides them when fs is parsed. An environment value that does
// not parse is reported by Validate unless the flag overrides it. The Temporal connection
// flags are registered through c.Temporal.RegisterFlags (worker/temporal.go), so a command must
// not register both.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	for _, k := range knobs {
		if v, ok := os.LookupEnv(k.env()); ok {
			if err := k.set(c, v); err != nil {
				if c.envErrs == nil {
					c.envErrs = map[string]error{}
				}
				c.envErrs[k.Flag] = fmt.Errorf("%s=%q: %w", k.env(), v, err)
			}
		}
		if k.temporal {
			continue
		}
		f := fs.VarPF(&knobValue{c: c, k: k}, k.Flag, "", k.Usage+" (env "+k.env()+")")
		if k.Type == "bool" {
			f.NoOptDefVal = "true"
		}
		if k.Secret {
			f.DefValue = ""
		}
	}
	c.Temporal.RegisterFlags(fs)
	// An explicitly given Temporal flag supersedes a bad environment value for it.
	for _, k := range knobs {
		if !k.temporal {
			continue
		}
		f := fs.Lookup(k.Flag)
		if f == nil {
			continue
		}
		if k.Secret {
			f.DefValue = ""
		}
		f.Value = &clearingValue{Value: f.Value, c: c, flag: k.Flag}
	}
}

// clearingValue wraps a flag registered elsewhere so that setting it clears the pending
// environment error of its knob.
type clearingValue struct {
	pflag.Value
	c    *Config
	flag string
}

func (v *clearingValue) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return err
	}
	delete(v.c.envErrs, v.flag)
	return nil
}

// knobValue adapts one knob of one Config to pflag.Value.
type knobValue struct {
	c *Config
	k knob
}

func (v *knobValue) String() string {
	if v.c == nil {
		return ""
	}
	return v.k.get(v.c)
}

func (v *knobValue) Set(s string) error {
	if err := v.k.set(v.c, s); err != nil {
		return err
	}
	delete(v.c.envErrs, v.k.Flag)
	return nil
}

func (v *knobValue) Type() string { return v.k.Type }

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
	out := make([]KnobInfo, 0, len(knobs))
	for _, k := range knobs {
		def := k.get(&d)
		if k.DocDefault != "" {
			def = k.DocDefault
		}
		out = append(out, KnobInfo{Flag: k.Flag, Env: k.env(), Type: k.Type, Default: def, Usage: k.Usage})
	}
	return out
}

// ConfigMarkdown renders docs/CONFIG.md.
func ConfigMarkdown() string {
	var b strings.Builder
	b.WriteString("# walkeeper worker configuration\n\n")
	b.WriteString("Generated from `worker.Knobs()` (worker/config.go); `go test ./worker -run TestConfigDocUpToDate`\n")
	b.WriteString("fails when this file is stale, and `WALKEEPER_UPDATE_DOCS=1` rewrites it.\n\n")
	b.WriteString("Every knob is a flag of `walkeeper worker` and an environment variable. Precedence:\n")
	b.WriteString("flag given on the command line > environment variable > default. Sizes take plain bytes\n")
	b.WriteString("or a binary suffix (`KiB`, `MiB`, `GiB`, `TiB`); durations take Go syntax (`5s`, `2m`) or\n")
	b.WriteString("plain seconds. `0` means *off* or *no cap* where the description says so.\n\n")
	b.WriteString("| flag | environment | type | default | meaning |\n|---|---|---|---|---|\n")
	for _, k := range Knobs() {
		def := k.Default
		if def == "" {
			def = "(empty)"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | `%s` | %s |\n", k.Flag, k.Env, k.Type, def, k.Usage)
	}
	b.WriteString(configNotes)
	return b.String()
}

const configNotes = `
## Notes

- **Shard identity.** The shard id is a pure function of ` + "`--instance`" + `. Two live processes with one
  instance id fence each other; give every worker its own stable id (a StatefulSet pod name works).
- **Triggers.** The flush sweeper seals every resident store that has a writer in this process each
  ` + "`--flush-interval`" + ` (a store opened only for reads, stats or merges is skipped: sealing it would list
  its WAL every tick; WAL a crashed earlier run left is replayed and sealed at worker start); the three
  store kinds are swept by independent loops so a slow kind never delays another, and a store whose
  seal exceeds ` + "`--flush-timeout`" + ` is abandoned for that tick (and skipped until its seal returns).
  After a seal, when the own shard has at least ` + "`--merge-after-generations`" + ` pending generations,
  the worker starts (or attaches to) the ` + "`MergeWal`" + ` workflow of that store through Temporal; it
  never merges in-process. A start failure is counted as a trigger failure, never as a flush failure,
  and is retried after the next successful flush of that store.
- **Flushing off.** With ` + "`--flush-interval 0`" + ` nothing seals until ` + "`POST .../flush`" + ` or shutdown, so
  appends stay invisible to other processes and the count trigger never fires.
- **Back-pressure.** An append to a store whose own shard already lists ` + "`--pending-max`" + ` pending
  generations is refused with 503 ` + "`too_many_pending`" + ` and a ` + "`Retry-After`" + ` header, and the worker starts
  (or attaches to) that store's ` + "`MergeWal`" + ` at most every 30 s while it refuses. Reads that would union
  more than ` + "`--pending-max`" + ` generations in one shard or in total are refused the same way.
- **Memory.** ` + "`--merge-budget-bytes`" + ` is shared by every merge in the process whatever triggered it;
  ` + "`--merge-max-bytes`" + ` and ` + "`--merge-max-generations`" + ` only size one pass. A merge reserves its
  peak footprint, not just its input: input + input/8 (per-row bookkeeping) + 20 MiB (the output chunk
  being built and the Parquet writer's buffers; the run is streamed to storage), measured in
  ` + "`walkeeper bench memory`" + `. So a pass of ` + "`--merge-max-bytes`" + ` needs about 1.13 × that plus 20 MiB of
  budget to run next to another one. ` + "`--memory-limit`" + ` sets the Go runtime's soft limit so that the
  garbage a merge leaves is collected before the heap doubles (with GOGC alone peak RSS reached 2 ×
  the budget in ` + "`walkeeper bench memory`" + `, 1.5 × with the limit at the budget); by default it is the budget plus ` + "`--cache-bytes`" + ` plus 512 MiB for everything else.
- **Pass size and parallel prepare (changed from docs/DESIGN.md §3).** ` + "`--merge-max-generations`" + ` defaults to
  64, not 8. Commits of one table go one at a time, and each MergeWal pass costs about 0.6 s of
  orchestration and storage round trips whatever its size; at 8 generations per pass one target
  committed 12.2 generations/s against the 20/s that 20 shards sealing every second produce, and its
  debt grew by ~32–58 generations per minute (docs/BENCHMARKS.md, incident replay runs A and B). At
  64 it committed 24.4/s and stayed bounded (run C); the system walkeeper replaces batched up to 64
  generations / 64 MiB as well. ` + "`--merge-max-bytes`" + ` still bounds a pass's memory. With
  ` + "`--merge-parallel-prepare`" + ` (default on) the count trigger asks MergeWal to prepare different shards'
  passes concurrently, which overlaps their storage round trips; with one pending shard nothing changes.
  The MaintenanceSweep does the same for targets with more than one pending shard (its schedule input
  ` + "`parallel_prepare`" + `, default true).
- **HTTP-only mode.** A worker started without a Temporal client serves the data plane and the
  flush sweeper only; ` + "`merge-wal`" + ` answers 503 ` + "`temporal_unavailable`" + ` and the count trigger is off.
`

// knob is one configuration entry: flag, env, doc and accessors.
type knob struct {
	Flag       string
	Type       string
	Usage      string
	DocDefault string
	Secret     bool
	temporal   bool // a TemporalConfig field; its flag comes from TemporalConfig.RegisterFlags
	get        func(*Config) string
	set        func(*Config, string) error
}

func (k knob) env() string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(k.Flag, "-", "_"))
}

func strKnob(flag, usage string, p func(*Config) *string) knob {
	return knob{Flag: flag, Type: "string", Usage: usage,
		get: func(c *Config) string { return *p(c) },
		set: func(c *Config, s string) error { *p(c) = s; return nil }}
}

func boolKnob(flag, usage string, p func(*Config) *bool) knob {
	return knob{Flag: flag, Type: "bool", Usage: usage,
		get: func(c *Config) string { return strconv.FormatBool(*p(c)) },
		set: func(c *Config, s string) error {
			v, err := parseBool(s)
			if err != nil {
				return err
			}
			*p(c) = v
			return nil
		}}
}

func intKnob(flag, usage string, p func(*Config) *int) knob {
	return knob{Flag: flag, Type: "int", Usage: usage,
		get: func(c *Config) string { return strconv.Itoa(*p(c)) },
		set: func(c *Config, s string) error {
			v, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return fmt.Errorf("not an integer")
			}
			*p(c) = v
			return nil
		}}
}

func bytesKnob(flag, usage string, p func(*Config) *int64) knob {
	return knob{Flag: flag, Type: "bytes", Usage: usage,
		get: func(c *Config) string { return FormatBytes(*p(c)) },
		set: func(c *Config, s string) error {
			v, err := ParseBytes(s)
			if err != nil {
				return err
			}
			*p(c) = v
			return nil
		}}
}

func bytesIntKnob(flag, usage string, p func(*Config) *int) knob {
	return knob{Flag: flag, Type: "bytes", Usage: usage,
		get: func(c *Config) string { return FormatBytes(int64(*p(c))) },
		set: func(c *Config, s string) error {
			v, err := ParseBytes(s)
			if err != nil {
				return err
			}
			if v > math.MaxInt32 || v < math.MinInt32 {
				return fmt.Errorf("%q is out of range", s)
			}
			*p(c) = int(v)
			return nil
		}}
}

func durKnob(flag, usage string, p func(*Config) *time.Duration) knob {
	return knob{Flag: flag, Type: "duration", Usage: usage,
		get: func(c *Config) string { return p(c).String() },
		set: func(c *Config, s string) error {
			v, err := ParseDuration(s)
			if err != nil {
				return err
			}
			*p(c) = v
			return nil
		}}
}

var knobs = func() []knob {
	ks := []knob{
		strKnob("instance", "stable instance id of this process; the shard id derives from it", func(c *Config) *string { return &c.Instance }),
		strKnob("storage", "storage root URL: file://, mem://, s3://, gs://, azblob://", func(c *Config) *string { return &c.Storage }),
		strKnob("temporal", "Temporal frontend host:port", func(c *Config) *string { return &c.Temporal.HostPort }),
		strKnob("namespace", "Temporal namespace", func(c *Config) *string { return &c.Temporal.Namespace }),
		boolKnob("temporal-tls", "use TLS to reach Temporal (implied by the TLS file flags and by an API key)", func(c *Config) *bool { return &c.Temporal.TLS }),
		strKnob("temporal-tls-cert", "client certificate (PEM file) for mTLS to Temporal", func(c *Config) *string { return &c.Temporal.TLSCert }),
		strKnob("temporal-tls-key", "client key (PEM file) for mTLS to Temporal", func(c *Config) *string { return &c.Temporal.TLSKey }),
		strKnob("temporal-tls-ca", "CA bundle (PEM file) to verify the Temporal server", func(c *Config) *string { return &c.Temporal.TLSCA }),
		strKnob("temporal-tls-server-name", "TLS server name override for Temporal", func(c *Config) *string { return &c.Temporal.TLSServerName }),
		strKnob("temporal-api-key", "Temporal API key (e.g. Temporal Cloud); implies TLS", func(c *Config) *string { return &c.Temporal.APIKey }),
		strKnob("listen", "HTTP data-plane listen address", func(c *Config) *string { return &c.Listen }),
		strKnob("auth-token", "bearer token required on every HTTP route but /healthz (empty = no auth)", func(c *Config) *string { return &c.AuthToken }),
		intKnob("merge-slots", "concurrent prepare/commit activities on this worker's shard queue", func(c *Config) *int { return &c.MergeSlots }),
		intKnob("shared-activity-slots", "concurrent activities on the shared queue \"walkeeper\"", func(c *Config) *int { return &c.SharedActivitySlots }),
		bytesKnob("merge-budget-bytes", "process-wide merge memory budget shared by every merge (0 = unlimited)", func(c *Config) *int64 { return &c.MergeBudgetBytes }),
		bytesKnob("memory-limit", "Go soft memory limit (debug.SetMemoryLimit); 0 = merge-budget-bytes + cache-bytes + 512MiB, none when the budget is unlimited or GOMEMLIMIT is set", func(c *Config) *int64 { return &c.MemoryLimitBytes }),
		intKnob("merge-max-generations", "generations one merge pass takes at most (0 = no cap)", func(c *Config) *int { return &c.MergeMaxGenerations }),
		bytesKnob("merge-max-bytes", "bytes one merge pass reads at most, checked at generation boundaries (0 = no cap)", func(c *Config) *int64 { return &c.MergeMaxBytes }),
		intKnob("merge-after-generations", "count trigger: after a seal, start MergeWal when the own shard has this many pending generations (0 = off)", func(c *Config) *int { return &c.MergeAfterGenerations }),
		boolKnob("merge-parallel-prepare", "count trigger: ask MergeWal to prepare the passes of different shards in parallel (commits stay one at a time)", func(c *Config) *bool { return &c.MergeParallelPrepare }),
		intKnob("merge-shards-per-commit", "count trigger: shards whose passes one MergeWal commit publishes in one base version (0 = 32, 1 = one shard per commit, at most 32)", func(c *Config) *int { return &c.MergeShardsPerCommit }),
		durKnob("flush-interval", "flush sweeper period: seal every resident store with a writer in this process (0 = off)", func(c *Config) *time.Duration { return &c.FlushInterval }),
		durKnob("flush-timeout", "per-store seal timeout in a sweep (0 = max(5 × flush-interval, 30s))", func(c *Config) *time.Duration { return &c.FlushTimeout }),
		intKnob("pending-warn", "warn when a read unions this many pending generations in one shard (0 = off)", func(c *Config) *int { return &c.PendingWarn }),
		intKnob("pending-max", "refuse reads above this many pending generations (one shard or total) and appends to an own shard at it (0 = off)", func(c *Config) *int { return &c.PendingMax }),
		bytesKnob("max-body-bytes", "largest HTTP request body", func(c *Config) *int64 { return &c.MaxBodyBytes }),
		bytesIntKnob("max-row-bytes", "largest row, measured as its JSON text (0 = no cap)", func(c *Config) *int { return &c.MaxRowBytes }),
		durKnob("group-commit-wait", "how long the WAL committer lingers for more appends (0 = batch what queued during the previous write)", func(c *Config) *time.Duration { return &c.GroupCommitWait }),
		intKnob("group-commit-max-rows", "rows per WAL object at most", func(c *Config) *int { return &c.GroupCommitMaxRows }),
		bytesKnob("cache-bytes", "decoded generations and base runs kept in memory for reads", func(c *Config) *int64 { return &c.CacheBytes }),
		durKnob("sweep-interval", "period of the Temporal schedule walkeeper-sweep ensured on start (0 = leave it alone)", func(c *Config) *time.Duration { return &c.SweepInterval }),
		strKnob("log-format", "log encoding: json or console", func(c *Config) *string { return &c.LogFormat }),
		strKnob("log-level", "log level: debug, info, warn, error", func(c *Config) *string { return &c.LogLevel }),
		durKnob("shutdown-timeout", "bound on graceful shutdown (HTTP drain, activity drain, final seal)", func(c *Config) *time.Duration { return &c.ShutdownTimeout }),
	}
	for i := range ks {
		switch ks[i].Flag {
		case "instance":
			ks[i].DocDefault = "host name"
		case "auth-token", "temporal-api-key":
			ks[i].Secret = true
		}
		if strings.HasPrefix(ks[i].Flag, "temporal") || ks[i].Flag == "namespace" {
			ks[i].temporal = true
		}
	}
	return ks
}()

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
