package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store"
)

func TestDefaultConfigIsValidAndDocumented(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	// The documented defaults are docs/CONFIG.md's, which TestConfigDocUpToDate holds to the knobs.
	if c.Instance == "" {
		t.Error("default instance is empty")
	}
	flushTimeout := func(interval, timeout time.Duration) time.Duration {
		return NewFlusher(FlusherOptions{Interval: interval, Timeout: timeout}).opts.Timeout
	}
	if got := flushTimeout(c.FlushInterval, c.FlushTimeout); got != 30*time.Second {
		t.Errorf("flush timeout for 5s interval = %v, want 30s (the floor)", got)
	}
	if got := flushTimeout(time.Minute, 0); got != 5*time.Minute {
		t.Errorf("flush timeout for 1m interval = %v, want 5m", got)
	}
	if got := flushTimeout(time.Minute, time.Second); got != time.Second {
		t.Errorf("explicit flush timeout = %v", got)
	}
	// Every knob has a WALKEEPER_ variable, a flag, a type and a description.
	seen := map[string]bool{}
	for _, k := range Knobs() {
		if k.Env != EnvPrefix+strings.ToUpper(strings.ReplaceAll(k.Flag, "-", "_")) || k.Usage == "" || k.Type == "" {
			t.Errorf("knob %+v is incompletely described", k)
		}
		if seen[k.Flag] {
			t.Errorf("knob %s listed twice", k.Flag)
		}
		seen[k.Flag] = true
	}
}

func TestConfigPrecedenceFlagOverEnvOverDefault(t *testing.T) {
	t.Setenv("WALKEEPER_MERGE_SLOTS", "7")
	t.Setenv("WALKEEPER_LISTEN", "127.0.0.1:9999")
	t.Setenv("WALKEEPER_NAMESPACE", "from-env")
	t.Setenv("WALKEEPER_MERGE_BUDGET_BYTES", "2GiB")
	t.Setenv("WALKEEPER_FLUSH_INTERVAL", "2")
	t.Setenv("WALKEEPER_TEMPORAL_TLS", "yes")
	t.Setenv("WALKEEPER_AUTH_TOKEN", "hidden")

	c, fs := parsedConfig(t, "--merge-slots=3", "--namespace", "from-flag", "--flush-timeout", "1m")
	require.NoError(t, c.Validate())
	assert.Equal(t, 3, c.MergeSlots, "flag lost to env")
	assert.Equal(t, "from-flag", c.Temporal.Namespace, "flag lost to env")
	assert.Equal(t, "127.0.0.1:9999", c.Listen, "env ignored")
	assert.Equal(t, int64(2<<30), c.MergeBudgetBytes, "env ignored")
	assert.Equal(t, 2*time.Second, c.FlushInterval, "plain seconds from env")
	assert.Equal(t, time.Minute, c.FlushTimeout)
	assert.True(t, c.Temporal.TLS, "WALKEEPER_TEMPORAL_TLS=yes ignored")
	assert.Equal(t, "hidden", c.AuthToken, "auth token from env ignored")
	assert.Empty(t, fs.Lookup("auth-token").DefValue, "--help would print the auth token")
	assert.Contains(t, fs.Lookup("merge-after-generations").Usage, "WALKEEPER_MERGE_AFTER_GENERATIONS",
		"flag usage does not name its environment variable")
}

func TestConfigBadEnvReportedUnlessFlagGiven(t *testing.T) {
	t.Setenv("WALKEEPER_MERGE_SLOTS", "many")
	t.Setenv("WALKEEPER_FLUSH_INTERVAL", "soon")
	t.Setenv("WALKEEPER_TEMPORAL_TLS", "maybe")

	c, _ := parsedConfig(t)
	err := c.Validate()
	if err == nil {
		t.Fatal("bad environment values accepted")
	}
	for _, v := range []string{"WALKEEPER_MERGE_SLOTS", "WALKEEPER_FLUSH_INTERVAL", "WALKEEPER_TEMPORAL_TLS"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error does not name %s: %v", v, err)
		}
	}

	c, _ = parsedConfig(t, "--merge-slots", "2", "--flush-interval", "1s", "--temporal-tls=false")
	if err := c.Validate(); err != nil {
		t.Fatalf("flags did not supersede bad env values: %v", err)
	}
}

func TestConfigValidateRejectsNonsense(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"instance":      func(c *Config) { c.Instance = " " },
		"storage":       func(c *Config) { c.Storage = "/just/a/path" },
		"listen":        func(c *Config) { c.Listen = "8080" },
		"listen port":   func(c *Config) { c.Listen = ":99999" },
		"listen sign":   func(c *Config) { c.Listen = "127.0.0.1:-1" },
		"temporal":      func(c *Config) { c.Temporal.HostPort = "" },
		"temporal port": func(c *Config) { c.Temporal.HostPort = "127.0.0.1:99999" },
		"temporal 0":    func(c *Config) { c.Temporal.HostPort = "127.0.0.1:0" },
		"temporal bare": func(c *Config) { c.Temporal.HostPort = "localhost" },
		"merge-slots":   func(c *Config) { c.MergeSlots = 0 },
		"flush":         func(c *Config) { c.FlushInterval = -time.Second },
		"pending-warn":  func(c *Config) { c.PendingWarn, c.PendingMax = 10, 5 },
		"merge after":   func(c *Config) { c.PendingWarn, c.PendingMax, c.MergeAfterGenerations = 0, 32, 50 },
		"body":          func(c *Config) { c.MaxBodyBytes = 0 },
		"page-bytes":    func(c *Config) { c.PageBytes = 0 },
		"page budget":   func(c *Config) { c.PageBudgetBytes = c.PageBytes + int64(c.MaxRowBytes) - 1 },
		"stall timeout": func(c *Config) { c.StorageStallTimeout = time.Millisecond },
		"page budget, small rows": func(c *Config) {
			c.PageBytes, c.MaxRowBytes = 1000, 100
			c.PageBudgetBytes = c.PageBytes + store.MaxStoreInfoJSONBytes - 1
		},
		"read timeout": func(c *Config) { c.HTTPReadTimeout = -time.Second },
		"connections":  func(c *Config) { c.MaxConnections = -1 },
		"memtable":     func(c *Config) { c.MemtableBytes = 0 },
		"append rows":  func(c *Config) { c.MaxAppendRows = -1 },
		"log-format":   func(c *Config) { c.LogFormat = "xml" },
		"log-level":    func(c *Config) { c.LogLevel = "loud" },
		"tls pair":     func(c *Config) { c.Temporal.TLSCert = "cert.pem" },
		"namespace":    func(c *Config) { c.Temporal.Namespace = "" },
		"token":        func(c *Config) { c.AuthToken = "a b" },
		"budget":       func(c *Config) { c.MergeBudgetBytes = -1 },
		"start conc 0": func(c *Config) { c.SweepStartConcurrency = 0 },
		"start conc":   func(c *Config) { c.SweepStartConcurrency = 257 },
		"deadlock":     func(c *Config) { c.WorkflowDeadlock = -time.Second },
	} {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := DefaultConfig()
	c.MergeAfterGenerations, c.FlushInterval, c.PendingWarn, c.PendingMax, c.MergeBudgetBytes = 0, 0, 0, 0, 0
	c.HTTPReadTimeout, c.HTTPWriteTimeout, c.MaxConnections, c.PageBudgetBytes = 0, 0, 0, 0
	if err := c.Validate(); err != nil {
		t.Errorf("0 = off must validate: %v", err)
	}
	// Any free port to listen on, a named service, and a gRPC resolver target are all usable.
	c = DefaultConfig()
	c.Listen, c.Temporal.HostPort = "127.0.0.1:0", "dns:///temporal.example:7233"
	if err := c.Validate(); err != nil {
		t.Errorf("listen port 0 and a resolver target must validate: %v", err)
	}
	c.Listen, c.Temporal.HostPort = "[::1]:http", "temporal.example:https"
	if err := c.Validate(); err != nil {
		t.Errorf("named ports must validate: %v", err)
	}
}

func TestParseSizesAndDurations(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1048576": 1 << 20, "1MiB": 1 << 20, "3GiB": 3 << 30,
		"3 gib": 3 << 30, "8Mi": 8 << 20, "512KiB": 512 << 10, "2TiB": 2 << 40, "10B": 10} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "1.5GiB", "99999999999TiB"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
	for v, want := range map[int64]string{0: "0", 3 << 30: "3GiB", 8 << 20: "8MiB", 1000: "1000", 1536: "1536", 2048: "2KiB"} {
		if got := FormatBytes(v); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", v, got, want)
		}
		if back, err := ParseBytes(FormatBytes(v)); err != nil || back != v {
			t.Errorf("FormatBytes(%d) does not round-trip: %v %v", v, back, err)
		}
	}
	for in, want := range map[string]time.Duration{"30": 30 * time.Second, "5s": 5 * time.Second, "2m30s": 150 * time.Second, "0": 0} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseDuration("soon"); err == nil {
		t.Error("ParseDuration accepted nonsense")
	}
	// Plain seconds past time.Duration's range are refused, not wrapped: 18446744074 s
	// would be 290 ms.
	for _, bad := range []string{"18446744074", "9223372037", "-9223372037"} {
		if d, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", bad, d)
		}
	}
}

// docs/CONFIG.md is generated from Knobs(); WALKEEPER_UPDATE_DOCS=1 rewrites it.
func TestConfigDocUpToDate(t *testing.T) {
	path := filepath.Join("..", "docs", "CONFIG.md")
	want := configMarkdown()
	if os.Getenv("WALKEEPER_UPDATE_DOCS") == "1" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with WALKEEPER_UPDATE_DOCS=1 to generate it)", err)
	}
	if string(got) != want {
		t.Fatal("docs/CONFIG.md is stale: run `WALKEEPER_UPDATE_DOCS=1 go test ./worker -run TestConfigDocUpToDate`")
	}
	for _, k := range Knobs() {
		if !strings.Contains(want, "`"+k.Env+"`") {
			t.Errorf("CONFIG.md lacks %s", k.Env)
		}
	}
}

// parsedConfig is DefaultConfig after the worker's flags parsed args (and the environment
// the test set), with the flag set.
func parsedConfig(t *testing.T, args ...string) (Config, *pflag.FlagSet) {
	t.Helper()
	c := DefaultConfig()
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c, fs
}
