//go:build !linux

package proc

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}
