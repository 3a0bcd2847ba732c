//go:build !race

package store

// allocCheck is off outside race-detector builds: an overdraft is counted and turned into
// ErrBudgetBusy (memAccount.err), never a panic.
const allocCheck = false
