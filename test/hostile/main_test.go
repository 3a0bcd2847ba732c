package hostile

import (
	"flag"
	"os"
	"testing"

	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
)

// suite runs every test's worker process against one shared Temporal server.
// WALKEEPER_HOSTILE_BIN names a walkeeper binary to attack instead of building
// ./cmd/walkeeper, so the suite can be run against an older build to show each test failing
// before its fix.
var suite = testtemporal.NewSuite(testtemporal.SuiteOptions{
	Name:       "hostile",
	Namespaces: 16,
	BinaryEnv:  "WALKEEPER_HOSTILE_BIN",
})

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(suite.Main(m))
}
