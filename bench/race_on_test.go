//go:build race

package bench

// raceEnabled: the race detector multiplies memory use (and CPU), so RSS bounds do not apply.
const raceEnabled = true
