package proc

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGTERM }

// tcpListen is the state /proc/net/tcp gives a listening socket.
const tcpListen = "0A"

// Listens reports whether the process holds a listening TCP socket on port. A port picked
// free can be taken by another process before this one binds it, and a readiness probe would
// then take that process's server for this one's.
func (p *Proc) Listens(port int) bool {
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || fs[3] != tcpListen {
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if n, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(n) == port {
				inodes[fs[9]] = true
			}
		}
		_ = f.Close()
	}
	if len(inodes) == 0 {
		return false
	}
	dir := fmt.Sprintf("/proc/%d/fd", p.PID())
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(dir, fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok && inodes[strings.TrimSuffix(inode, "]")] {
			return true
		}
	}
	return false
}
