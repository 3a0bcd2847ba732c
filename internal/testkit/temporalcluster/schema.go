package temporalcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/walkeeper/walkeeper/internal/cachebin"
	"github.com/walkeeper/walkeeper/internal/testkit/testbin"
)

// Databases Temporal's postgres12 plugin uses: persistence and SQL visibility.
const (
	DatabaseTemporal   = "temporal"
	DatabaseVisibility = "temporal_visibility"
)

// SchemaScript is the set-up script docker-compose.yml runs in its temporal-schema service,
// relative to the module root. The test cluster runs the same file, so every cluster test
// proves the compose set-up's schema step.
const SchemaScript = "deploy/temporal/setup-postgres.sh"

// setupSchemas creates both databases and applies every versioned schema step with the
// server's own tool, through SchemaScript: exactly what an operator's compose set-up runs.
// The tool's output goes to logPath.
func setupSchemas(ctx context.Context, sqlTool, schemaRoot string, port int, logPath string) error {
	root, err := cachebin.ModuleRoot()
	if err != nil {
		return err
	}
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, "sh", filepath.Join(root, SchemaScript))
	cmd.Env = append(os.Environ(),
		"SQL_TOOL="+sqlTool,
		"SCHEMA_DIR="+schemaRoot,
		"POSTGRES_SEEDS=127.0.0.1",
		"DB_PORT="+strconv.Itoa(port),
		"POSTGRES_USER="+PostgresUser,
		"POSTGRES_PWD=",
		"DBNAME="+DatabaseTemporal,
		"VISIBILITY_DBNAME="+DatabaseVisibility,
		"CONNECT_ATTEMPTS=10",
	)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w (output in %s)", SchemaScript, err, logPath)
	}
	return nil
}

// findSchemaRoot returns the directory holding the server's PostgreSQL schemas
// (temporal/versioned and visibility/versioned): $WALKEEPER_TEMPORAL_SCHEMA_DIR, else the copy
// scripts/install-temporal-server.sh keeps in .cache, else the server module in the Go
// module cache.
func findSchemaRoot(version string) (string, error) {
	var candidates []string
	if d := os.Getenv("WALKEEPER_TEMPORAL_SCHEMA_DIR"); d != "" {
		candidates = append(candidates, d)
	}
	if root, err := cachebin.ModuleRoot(); err == nil {
		candidates = append(candidates, filepath.Join(root, ".cache", "temporal-server", version, "schema", "postgresql", "v12"))
	}
	if mc := cachebin.GoEnv("GOMODCACHE"); mc != "" {
		candidates = append(candidates, filepath.Join(mc, "go.temporal.io", "server@"+version, "schema", "postgresql", "v12"))
	}
	for _, d := range candidates {
		if _, err := os.Stat(filepath.Join(d, "visibility", "versioned")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("Temporal %s PostgreSQL schemas: %w (looked in %v; run scripts/install-temporal-server.sh)", version, testbin.ErrNotInstalled, candidates)
}
