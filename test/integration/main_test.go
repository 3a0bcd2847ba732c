// Package integration runs walkeeper end to end against a real Temporal server started by
// TestMain (never assumed running) through internal/testkit/testtemporal: `temporal server
// start-dev` by default, the production server on PostgreSQL with
// WALKEEPER_TEST_TEMPORAL_SERVER=cluster,
// in-process workers built with worker.New on file:// storage, and, where a test needs a
// real OS process, the walkeeper binary built by TestMain or this test binary re-executed
// as a worker.
//
// Every test gets its own Temporal namespace (created when the server starts), so tests run
// in parallel without one test's workers picking up another's tasks.
//
// `go test -short` skips the package.
package integration

import (
	"flag"
	"os"
	"testing"

	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
)

var suite = testtemporal.NewSuite(testtemporal.SuiteOptions{
	Name:       "it",
	Namespaces: 20,
})

func TestMain(m *testing.M) {
	if child := os.Getenv(childEnv); child != "" {
		os.Exit(runChild(child))
	}
	flag.Parse()
	os.Exit(suite.Main(m))
}
