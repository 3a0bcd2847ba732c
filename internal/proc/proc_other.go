//go:build !linux

package proc

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}

// Listens reports true: without /proc it cannot tell whose server holds a port.
func (p *Proc) Listens(port int) bool { return true }
