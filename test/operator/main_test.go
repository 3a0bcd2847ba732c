package operator

import (
	"flag"
	"os"
	"testing"

	"github.com/walkeeper/walkeeper/internal/testkit/testtemporal"
)

var suite = testtemporal.NewSuite(testtemporal.SuiteOptions{
	Name:       "op",
	Namespaces: 1,
})

func TestMain(m *testing.M) {
	flag.Parse()
	// The cases mostly wait on Temporal and the worker processes, each on its own store:
	// run them together unless -test.parallel was given.
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		_ = flag.Set("test.parallel", defaultParallel)
	}
	os.Exit(suite.Main(m))
}
