package temporalcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestServerConfigIsTheProductionShape checks the rendered static config: several history
// shards, the postgres12 plugin for persistence and SQL visibility, an absolute dynamic
// config path, every port distinct.
func TestServerConfigIsTheProductionShape(t *testing.T) {
	p, err := newPorts()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := serverConfig(p, 5432, "relative/dc.yaml", 0); err == nil {
		t.Fatal("a relative dynamic config path was accepted; the server would resolve it against --root")
	}
	raw, err := serverConfig(p, 5432, "/abs/dc.yaml", 0)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Persistence struct {
			DefaultStore     string `yaml:"defaultStore"`
			VisibilityStore  string `yaml:"visibilityStore"`
			NumHistoryShards int    `yaml:"numHistoryShards"`
			Datastores       map[string]struct {
				SQL struct {
					PluginName   string `yaml:"pluginName"`
					DatabaseName string `yaml:"databaseName"`
				} `yaml:"sql"`
			} `yaml:"datastores"`
		} `yaml:"persistence"`
		DynamicConfigClient struct {
			Filepath string `yaml:"filepath"`
		} `yaml:"dynamicConfigClient"`
		Services map[string]struct {
			RPC map[string]any `yaml:"rpc"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	ps := cfg.Persistence
	if ps.NumHistoryShards < 4 {
		t.Errorf("numHistoryShards %d, want >= 4", ps.NumHistoryShards)
	}
	def, vis := ps.Datastores[ps.DefaultStore].SQL, ps.Datastores[ps.VisibilityStore].SQL
	if def.PluginName != PluginName || def.DatabaseName != DatabaseTemporal {
		t.Errorf("default store %+v", def)
	}
	if vis.PluginName != PluginName || vis.DatabaseName != DatabaseVisibility {
		t.Errorf("visibility store %+v: want SQL visibility on %s", vis, PluginName)
	}
	if cfg.DynamicConfigClient.Filepath != "/abs/dc.yaml" {
		t.Errorf("dynamic config path %q", cfg.DynamicConfigClient.Filepath)
	}
	seen := map[int]string{}
	for name, svc := range cfg.Services {
		for k, v := range svc.RPC {
			if port, ok := v.(int); ok && strings.HasSuffix(k, "Port") {
				if other, dup := seen[port]; dup {
					t.Errorf("port %d used by %s and %s.%s", port, other, name, k)
				}
				seen[port] = name + "." + k
			}
		}
	}
	if len(seen) != 9 {
		t.Errorf("%d ports, want 9 (4 services x gRPC+membership, frontend HTTP)", len(seen))
	}
}

// TestDynamicConfigMerge: the base file's keys survive, extras override.
func TestDynamicConfigMerge(t *testing.T) {
	base, err := DefaultDynamicConfigBase()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "dc.yaml")
	if err := writeDynamicConfig(out, base, map[string]any{"limit.maxIDLength": 1000}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var dc map[string][]struct {
		Value any `yaml:"value"`
	}
	if err := yaml.Unmarshal(raw, &dc); err != nil {
		t.Fatal(err)
	}
	if v := dc["history.transferProcessorMaxPollRPS"]; len(v) != 1 || v[0].Value.(int) <= 20 {
		t.Errorf("history.transferProcessorMaxPollRPS = %v, want raised above the default 20", v)
	}
	if v := dc["limit.maxIDLength"]; len(v) != 1 || v[0].Value.(int) != 1000 {
		t.Errorf("override lost: %v", v)
	}
}
