//go:build !race

package operator

// defaultParallel is how many cases run at once unless -test.parallel says otherwise.
const defaultParallel = "12"
