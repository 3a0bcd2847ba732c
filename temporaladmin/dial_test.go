package temporaladmin_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/temporaladmin"
)

func TestConfigTLS(t *testing.T) {
	// Plain by default.
	o, err := temporaladmin.Config{}.ClientOptions(nil)
	require.NoError(t, err)
	assert.Nil(t, o.ConnectionOptions.TLS)
	assert.Equal(t, temporaladmin.DefaultHostPort, o.HostPort)
	assert.Equal(t, temporaladmin.DefaultNamespace, o.Namespace)

	// An API key implies TLS and sets credentials.
	o, err = temporaladmin.Config{HostPort: "ns.acct.tmprl.cloud:7233", APIKey: "k"}.ClientOptions(nil)
	require.NoError(t, err)
	require.NotNil(t, o.ConnectionOptions.TLS)
	assert.NotNil(t, o.Credentials)
}

// A TLS configuration that cannot load is refused naming why: a cert without its key, a CA
// file that is missing or holds no PEM, and a file that is a FIFO, a device or larger than a
// certificate bundle, which is refused without reading it: the read of a FIFO blocked until a
// writer came, and /dev/zero grew the process without end.
func TestConfigTLSRefusesFilesThatAreNotCertificates(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "ca.fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	huge := filepath.Join(dir, "huge.pem")
	require.NoError(t, os.WriteFile(huge, bytes.Repeat([]byte("-"), temporaladmin.MaxPEMFileBytes+1), 0o600))
	bad := filepath.Join(dir, "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not pem"), 0o644))
	for _, c := range []struct {
		cfg  temporaladmin.Config
		want string
	}{
		{temporaladmin.Config{TLSCert: "a.pem"}, "--temporal-tls-cert and --temporal-tls-key must be given together"},
		{temporaladmin.Config{TLSCA: filepath.Join(dir, "missing.pem")}, "read CA: "},
		{temporaladmin.Config{TLSCA: bad, TLSServerName: "x"}, "no PEM certificates in " + bad},
		{temporaladmin.Config{TLSCA: fifo}, fifo + " is not a regular file"},
		{temporaladmin.Config{TLSCA: "/dev/zero"}, "/dev/zero is not a regular file"},
		{temporaladmin.Config{TLSCA: dir}, dir + " is not a regular file"},
		{temporaladmin.Config{TLSCA: huge}, huge + " is larger than 1048576 bytes"},
		{temporaladmin.Config{TLSCert: fifo, TLSKey: huge}, fifo + " is not a regular file"},
		{temporaladmin.Config{TLSCert: huge, TLSKey: "/dev/zero"}, huge + " is larger than 1048576 bytes"},
	} {
		_, err := c.cfg.ClientOptions(nil)
		require.ErrorContains(t, err, c.want)
	}
}
