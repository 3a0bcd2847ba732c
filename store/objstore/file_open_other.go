//go:build !unix

package objstore

// openNoWait and openDirOnly are file_open_unix.go's flags; this system has no FIFOs to wait on.
const (
	openNoWait  = 0
	openDirOnly = 0
)
