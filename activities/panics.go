package activities

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/walkeeper/walkeeper/store"
)

// recovering runs fn, which runs in a goroutine an activity started: the SDK recovers only
// the activity's own goroutine, so a panic of fn would end the process. It is logged with its
// stack, counted (store.RecoveredPanics) and returned as fn's error, an Internal failure.
func (a *Activities) recovering(where string, fn func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			pe := store.NewPanicError(where, v)
			a.logger().Error("activity goroutine panicked", zap.String("where", where),
				zap.String("panic", fmt.Sprint(v)), zap.ByteString("stack", pe.Stack))
			err = pe
		}
	}()
	return fn()
}
