//go:build race

package bench

// raceEnabled: the race detector multiplies CPU time (2–20×) and memory use (5–10×, per the
// Go documentation). Only timing bounds and the RSS bound scale with it; every correctness
// check stays on.
const raceEnabled = true

const (
	raceSlowdown  = 10.0 // timing bounds
	raceMemFactor = 8.0  // RSS bounds of race-built children
)
