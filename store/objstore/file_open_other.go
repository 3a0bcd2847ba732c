//go:build !unix

package objstore

import "os"

// openObjectFlags and openDirFlags are file_open_unix.go's flags; this system has no FIFOs
// to wait on.
const (
	openObjectFlags = 0
	openDirFlags    = 0
)

// listable is d: file_open_unix.go says why Unix lists through another descriptor.
func listable(d *os.File) (*os.File, error) { return d, nil }
