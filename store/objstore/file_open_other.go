//go:build !unix

package objstore

// openObjectFlags and openDirFlags are file_open_unix.go's flags; this system has no FIFOs
// to wait on.
const (
	openObjectFlags = 0
	openDirFlags    = 0
)
