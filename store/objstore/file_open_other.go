//go:build !unix

package objstore

// openObjectFlags and openDirFlags are file_open_unix.go's flags; this system has no FIFOs
// to wait on, and underRealDirs refuses its symlinked directories.
const (
	openObjectFlags = 0
	openDirFlags    = 0
)
