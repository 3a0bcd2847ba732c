//go:build race

package store

// raceEnabled: the race detector maps its shadow memory as address space.
const raceEnabled = true
