//go:build race

package store

// allocCheck: with the race detector, a memAccount panics when an allocation overdraws its
// reservation (unless it holds the whole limit) or reserved bytes exceed the budget, so the
// store tests prove the footprint model instead of only counting overdrafts.
const allocCheck = true
