package temporalcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/walkeeper/walkeeper/internal/cachebin"
)

// Databases Temporal's postgres12 plugin uses: persistence and SQL visibility.
const (
	DatabaseTemporal   = "temporal"
	DatabaseVisibility = "temporal_visibility"
)

// setupSchemas creates both databases and applies every versioned schema step with the
// server's own tool, exactly as an operator sets up a PostgreSQL-backed cluster.
func setupSchemas(ctx context.Context, sqlTool, schemaRoot string, port int, log *os.File) error {
	for _, db := range []struct{ name, dir string }{
		{DatabaseTemporal, "temporal"},
		{DatabaseVisibility, "visibility"},
	} {
		base := []string{"--plugin", "postgres12", "--endpoint", "127.0.0.1", "--port", strconv.Itoa(port),
			"--user", PostgresUser, "--password", "", "--database", db.name}
		steps := [][]string{
			{"create-database"},
			{"setup-schema", "--version", "0.0"},
			{"update-schema", "--schema-dir", filepath.Join(schemaRoot, db.dir, "versioned")},
		}
		for _, step := range steps {
			cmd := exec.CommandContext(ctx, sqlTool, append(append([]string{}, base...), step...)...)
			cmd.Stdout, cmd.Stderr = log, log
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("temporal-sql-tool %s on %s: %w (output in %s)", step[0], db.name, err, log.Name())
			}
		}
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
	if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
		mc := strings.TrimSpace(string(out))
		candidates = append(candidates, filepath.Join(mc, "go.temporal.io", "server@"+version, "schema", "postgresql", "v12"))
	}
	for _, d := range candidates {
		if _, err := os.Stat(filepath.Join(d, "visibility", "versioned")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("Temporal %s PostgreSQL schemas: %w (looked in %v; run scripts/install-temporal-server.sh)", version, cachebin.ErrNotInstalled, candidates)
}
