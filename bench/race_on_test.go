//go:build race

package bench

// raceEnabled: the race detector multiplies CPU time (2–20×) and memory use (5–10×, per the
// Go documentation). Only timing bounds and the RSS bound scale with it; every correctness
// check stays on.
const raceEnabled = true

const (
	raceSlowdown = 10.0 // timing bounds
	// raceMemFactor scales the RSS-growth bounds of race-built memory children. A quick run
	// measured 2.6–2.9× the normal build's growth (235/180/144 MiB against 91/58/51), so 3×
	// keeps the normal build's 2× margin over the claims.
	raceMemFactor = 3.0
)
