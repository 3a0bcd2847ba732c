package deploy_test

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/walkeeper/walkeeper/internal/devserver"
	"github.com/walkeeper/walkeeper/internal/testkit/temporalcluster"
)

// TestComposeMatchesNativeCI keeps docker-compose.yml and the servers CI runs natively in
// step: one Temporal server version, PostgreSQL major, S3 server version, history shard
// count, persistence plugin, database names and dynamic config file, and the credentials the
// workers sign with equal to the s3 service's root account.
func TestComposeMatchesNativeCI(t *testing.T) {
	services := composeServices(t)
	// ${VAR:-default} in an image reference: the default is what `docker compose up` runs.
	tag := func(service string) (repo, version string) {
		img := services[service].Image
		img = regexp.MustCompile(`\$\{[A-Z_]+:-([^}]+)\}`).ReplaceAllString(img, "$1")
		repo, version, _ = strings.Cut(img, ":")
		return repo, version
	}

	if repo, v := tag("temporal"); repo != "temporalio/server" || "v"+v != temporalcluster.ServerVersion {
		t.Errorf("compose temporal image %s:%s; CI runs Temporal server %s (internal/testkit/temporalcluster)", repo, v, temporalcluster.ServerVersion)
	}
	// The schema and namespace one-shots: the admin-tools build of the same server release,
	// each running the deploy/temporal script that CI runs natively.
	for service, script := range map[string]string{
		"temporal-schema":    temporalcluster.SchemaScript,
		"temporal-namespace": "deploy/temporal/create-namespace.sh",
	} {
		if repo, v := tag(service); repo != "temporalio/admin-tools" || !strings.HasPrefix("v"+v, temporalcluster.ServerVersion+"-") {
			t.Errorf("compose %s image %s:%s; want temporalio/admin-tools of server %s", service, repo, v, temporalcluster.ServerVersion)
		}
		if !slices.ContainsFunc(services[service].Volumes, func(v string) bool { src, _, _ := strings.Cut(v, ":"); return src == "./"+script }) {
			t.Errorf("compose %s does not run ./%s", service, script)
		}
	}
	if !strings.Contains(readFile(t, "scripts/install-temporal-server.sh"), `VERSION="${TEMPORAL_SERVER_VERSION:-`+temporalcluster.ServerVersion+`}"`) {
		t.Errorf("scripts/install-temporal-server.sh does not install %s", temporalcluster.ServerVersion)
	}
	if repo, v := tag("postgresql"); repo != "postgres" || strings.SplitN(v, ".", 2)[0] != temporalcluster.PostgresMajor {
		t.Errorf("compose postgresql image %s:%s; CI runs PostgreSQL %s", repo, v, temporalcluster.PostgresMajor)
	}
	vgw := regexp.MustCompile(`VERSION="\$\{VERSITYGW_VERSION:-([^}]+)\}"`).FindStringSubmatch(readFile(t, "scripts/install-versitygw.sh"))
	if repo, v := tag("s3"); vgw == nil || repo != "versity/versitygw" || v != vgw[1] {
		t.Errorf("compose s3 image %s:%s; the storage matrix runs versitygw %v (scripts/install-versitygw.sh)", repo, v, vgw)
	}

	env := services["temporal"].Environment
	want := map[string]string{
		"DB":                 temporalcluster.PluginName,
		"DBNAME":             temporalcluster.DatabaseTemporal,
		"VISIBILITY_DBNAME":  temporalcluster.DatabaseVisibility,
		"NUM_HISTORY_SHARDS": strconv.Itoa(temporalcluster.DefaultHistoryShards),
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("compose temporal %s=%q, CI's cluster uses %q", k, env[k], v)
		}
	}
	// The schema step writes the databases the server reads, with the server's credentials.
	schemaEnv := services["temporal-schema"].Environment
	for _, k := range []string{"DBNAME", "VISIBILITY_DBNAME", "POSTGRES_SEEDS", "DB_PORT", "POSTGRES_USER", "POSTGRES_PWD"} {
		if schemaEnv[k] != env[k] {
			t.Errorf("compose temporal-schema %s=%q, the server uses %q", k, schemaEnv[k], env[k])
		}
	}
	// The same dynamic config file, at an absolute path (a relative one is resolved against
	// the server's root, not where the file is mounted).
	dc := env["DYNAMIC_CONFIG_FILE_PATH"]
	if !path.IsAbs(dc) {
		t.Errorf("DYNAMIC_CONFIG_FILE_PATH %q is not absolute", dc)
	}
	if !slices.ContainsFunc(services["temporal"].Volumes, func(v string) bool {
		src, dst, _ := strings.Cut(v, ":")
		return src == "./deploy/temporal/dynamicconfig.yaml" && strings.TrimSuffix(dst, ":ro") == dc
	}) {
		t.Errorf("compose temporal does not mount deploy/temporal/dynamicconfig.yaml at %s, the file CI's cluster reads", dc)
	}
	if base, err := temporalcluster.DefaultDynamicConfigBase(); err != nil || !strings.HasSuffix(base, "/deploy/temporal/dynamicconfig.yaml") {
		t.Errorf("temporalcluster's dynamic config base is %q (%v)", base, err)
	}

	s3 := services["s3"].Environment
	for name, svc := range services {
		if svc.Environment["WALKEEPER_STORAGE"] == "" {
			continue
		}
		if svc.Environment["AWS_ACCESS_KEY_ID"] != s3["ROOT_ACCESS_KEY"] || svc.Environment["AWS_SECRET_ACCESS_KEY"] != s3["ROOT_SECRET_KEY"] {
			t.Errorf("service %s signs with AWS_ACCESS_KEY_ID=%q, the s3 service's root account is %q", name, svc.Environment["AWS_ACCESS_KEY_ID"], s3["ROOT_ACCESS_KEY"])
		}
	}
}

// TestDevServerTuningMatchesDynamicConfig: every setting the dev server is tuned with
// (devserver.TunedDynamicConfig: the transfer-queue poll rate, the new matcher, task-queue
// fairness, one partition per queue) is in deploy/temporal/dynamicconfig.yaml with the same value, so the dev server
// tests run on and the cluster CI and docker-compose run behave alike.
func TestDevServerTuningMatchesDynamicConfig(t *testing.T) {
	var dc map[string][]struct {
		Value any `yaml:"value"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "deploy/temporal/dynamicconfig.yaml")), &dc); err != nil {
		t.Fatal(err)
	}
	for _, kv := range devserver.TunedDynamicConfig {
		key, want, _ := strings.Cut(kv, "=")
		vals := dc[key]
		if len(vals) != 1 {
			t.Errorf("dynamicconfig.yaml has %d values for %s; the dev server is tuned with %s", len(vals), key, kv)
			continue
		}
		if got := fmt.Sprint(vals[0].Value); got != want {
			t.Errorf("dynamicconfig.yaml sets %s to %s; the dev server is tuned with %s", key, got, kv)
		}
	}
}
