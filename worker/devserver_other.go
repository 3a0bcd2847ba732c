//go:build !linux

package worker

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}
