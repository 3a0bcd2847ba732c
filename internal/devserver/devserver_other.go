//go:build !linux

package devserver

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}
