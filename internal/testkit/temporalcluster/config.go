package temporalcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/walkeeper/walkeeper/internal/proc"
)

// PluginName is the SQL persistence plugin for PostgreSQL 12 and later, used for both the
// default store and SQL visibility (docker-compose's DB=postgres12 is the same).
const PluginName = "postgres12"

// ports are the server's listening ports: every service of the single binary needs a gRPC
// and a membership port, the frontend also its HTTP API.
type ports struct {
	Frontend, FrontendHTTP, FrontendMembership int
	History, HistoryMembership                 int
	Matching, MatchingMembership               int
	Worker, WorkerMembership                   int
}

// newPorts picks nine distinct free loopback ports. proc.FreePorts keeps them below 32768,
// which this server needs too: the PostgreSQL schema keeps a host's membership port in
// cluster_membership.rpc_port, a SMALLINT, and the server exits ("value out of range for
// type smallint") on a port from the ephemeral range.
func newPorts() (ports, error) {
	f, err := proc.FreePorts(9)
	if err != nil {
		return ports{}, err
	}
	if m := slices.Max(f); m >= 1<<15 {
		return ports{}, fmt.Errorf("port %d does not fit cluster_membership.rpc_port (SMALLINT)", m)
	}
	return ports{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8]}, nil
}

// serverConfig renders the static config of a single-binary server on PostgreSQL: the
// postgres12 plugin for persistence and for SQL visibility (custom search attributes are
// pre-allocated columns there; see docs/TEMPORAL.md), DefaultHistoryShards shards, and the
// dynamic config at dynamicConfigPath (it must be absolute: the server resolves a relative
// path against its root, not the working directory).
func serverConfig(p ports, pgPort int, dynamicConfigPath string, metricsPort int) ([]byte, error) {
	if !filepath.IsAbs(dynamicConfigPath) {
		return nil, fmt.Errorf("dynamic config path %q must be absolute", dynamicConfigPath)
	}
	sqlStore := func(db string, conns int) map[string]any {
		return map[string]any{"sql": map[string]any{
			"pluginName":      PluginName,
			"databaseName":    db,
			"connectAddr":     fmt.Sprintf("127.0.0.1:%d", pgPort),
			"connectProtocol": "tcp",
			"user":            PostgresUser,
			"password":        "",
			"maxConns":        conns,
			"maxIdleConns":    conns,
			"maxConnLifetime": "1h",
		}}
	}
	svc := func(grpc, membership int) map[string]any {
		return map[string]any{"rpc": map[string]any{"grpcPort": grpc, "membershipPort": membership, "bindOnLocalHost": true}}
	}
	frontend := svc(p.Frontend, p.FrontendMembership)
	frontend["rpc"].(map[string]any)["httpPort"] = p.FrontendHTTP
	cfg := map[string]any{
		"log": map[string]any{"stdout": true, "level": "warn"},
		"persistence": map[string]any{
			"defaultStore":     "postgres-default",
			"visibilityStore":  "postgres-visibility",
			"numHistoryShards": DefaultHistoryShards,
			"datastores": map[string]any{
				"postgres-default":    sqlStore(DatabaseTemporal, 20),
				"postgres-visibility": sqlStore(DatabaseVisibility, 10),
			},
		},
		"global": map[string]any{
			"membership": map[string]any{"maxJoinDuration": "30s", "broadcastAddress": "127.0.0.1"},
		},
		"services": map[string]any{
			"frontend": frontend,
			"history":  svc(p.History, p.HistoryMembership),
			"matching": svc(p.Matching, p.MatchingMembership),
			"worker":   svc(p.Worker, p.WorkerMembership),
		},
		"clusterMetadata": map[string]any{
			"enableGlobalNamespace":    false,
			"failoverVersionIncrement": 10,
			"masterClusterName":        "active",
			"currentClusterName":       "active",
			"clusterInformation": map[string]any{"active": map[string]any{
				"enabled":                true,
				"initialFailoverVersion": 1,
				"rpcName":                "frontend",
				"rpcAddress":             fmt.Sprintf("127.0.0.1:%d", p.Frontend),
			}},
		},
		"dcRedirectionPolicy": map[string]any{"policy": "noop"},
		"dynamicConfigClient": map[string]any{"filepath": dynamicConfigPath, "pollInterval": "10s"},
	}
	if metricsPort != 0 {
		// Prometheus scrape endpoint of the server's own metrics (persistence_requests, ...).
		cfg["global"].(map[string]any)["metrics"] = map[string]any{"prometheus": map[string]any{
			"framework": "tally", "listenAddress": fmt.Sprintf("127.0.0.1:%d", metricsPort), "timerType": "histogram",
		}}
	}
	return yaml.Marshal(cfg)
}

// writeDynamicConfig writes base (a dynamic-config YAML file, e.g. the one docker-compose
// mounts) merged with extra (key -> value without constraints) to path.
func writeDynamicConfig(path, base string, extra map[string]any) error {
	raw, err := os.ReadFile(base)
	if err != nil {
		return err
	}
	dc := map[string]any{}
	if err := yaml.Unmarshal(raw, &dc); err != nil {
		return fmt.Errorf("dynamic config %s: %w", base, err)
	}
	for k, v := range extra {
		dc[k] = []map[string]any{{"value": v, "constraints": map[string]any{}}}
	}
	out, err := yaml.Marshal(dc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o644)
}
