//go:build race

package operator

// defaultParallel is how many cases run at once unless -test.parallel says otherwise: fewer
// under the race detector, which slows this process's S3 server several times.
const defaultParallel = "4"
