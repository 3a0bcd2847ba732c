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

// services are the services of the single binary: each listens on a gRPC and a membership
// port, the frontend also on an HTTP port.
var services = []string{"frontend", "history", "matching", "worker"}

// newPorts picks the server's nine distinct free loopback ports: service i's gRPC port is
// 2i, its membership port 2i+1, and the frontend's HTTP port the last. proc.FreePorts keeps
// them below 32768, which this server needs too: the PostgreSQL schema keeps a host's
// membership port in cluster_membership.rpc_port, a SMALLINT, and the server exits ("value
// out of range for type smallint") on a port from the ephemeral range.
func newPorts() ([]int, error) {
	f, err := proc.FreePorts(2*len(services) + 1)
	if err != nil {
		return nil, err
	}
	if m := slices.Max(f); m >= 1<<15 {
		return nil, fmt.Errorf("port %d does not fit cluster_membership.rpc_port (SMALLINT)", m)
	}
	return f, nil
}

// serverConfig renders the static config of a single-binary server on PostgreSQL: the
// postgres12 plugin for persistence and for SQL visibility (custom search attributes are
// pre-allocated columns there; see docs/TEMPORAL.md), DefaultHistoryShards shards, and the
// dynamic config at dynamicConfigPath (it must be absolute: the server resolves a relative
// path against its root, not the working directory).
func serverConfig(p []int, pgPort int, dynamicConfigPath string, metricsPort int) ([]byte, error) {
	if !filepath.IsAbs(dynamicConfigPath) {
		return nil, fmt.Errorf("dynamic config path %q must be absolute", dynamicConfigPath)
	}
	sqlStore := func(db string, conns int) map[string]any {
		return map[string]any{"sql": map[string]any{"pluginName": PluginName, "databaseName": db,
			"connectAddr": proc.Addr(pgPort), "connectProtocol": "tcp", "user": PostgresUser, "password": "",
			"maxConns": conns, "maxIdleConns": conns, "maxConnLifetime": "1h"}}
	}
	svcs := map[string]any{}
	for i, name := range services {
		rpc := map[string]any{"grpcPort": p[2*i], "membershipPort": p[2*i+1], "bindOnLocalHost": true}
		if name == "frontend" {
			rpc["httpPort"] = p[2*len(services)]
		}
		svcs[name] = map[string]any{"rpc": rpc}
	}
	global := map[string]any{"membership": map[string]any{"maxJoinDuration": "30s", "broadcastAddress": "127.0.0.1"}}
	if metricsPort != 0 {
		// Prometheus scrape endpoint of the server's own metrics (persistence_requests, ...).
		global["metrics"] = map[string]any{"prometheus": map[string]any{
			"framework": "tally", "listenAddress": proc.Addr(metricsPort), "timerType": "histogram"}}
	}
	return yaml.Marshal(map[string]any{
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
		"global":   global,
		"services": svcs,
		"clusterMetadata": map[string]any{"enableGlobalNamespace": false, "failoverVersionIncrement": 10,
			"masterClusterName": "active", "currentClusterName": "active",
			"clusterInformation": map[string]any{"active": map[string]any{
				"enabled": true, "initialFailoverVersion": 1, "rpcName": "frontend", "rpcAddress": proc.Addr(p[0])}},
		},
		"dcRedirectionPolicy": map[string]any{"policy": "noop"},
		"dynamicConfigClient": map[string]any{"filepath": dynamicConfigPath, "pollInterval": "10s"},
	})
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
