package activities

import "github.com/walkeeper/walkeeper/store"

// recovering runs fn, which runs in a goroutine an activity started: the SDK recovers only
// the activity's own goroutine, so a panic of fn would end the process. It is logged with its
// stack, counted (store.RecoveredPanics) and returned as fn's error, an Internal failure.
func (a *Activities) recovering(where string, fn func() error) (err error) {
	defer store.RecoverTo(a.logger(), where, &err)
	return fn()
}
