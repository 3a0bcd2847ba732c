//go:build !race

package bench

const raceEnabled = false

const (
	raceSlowdown  = 1.0
	raceMemFactor = 1.0
)
