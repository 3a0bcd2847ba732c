package devserver

import "syscall"

// setParentDeathSignal makes the kernel SIGTERM the dev server if walkeeper dies without
// stopping it (a killed test binary, a crashed `walkeeper dev`), so no server is leaked.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGTERM }
