//go:build wip && race

package reliability

const raceEnabled = true
