package temporaladmin_test

import (
	"os"
	"path/filepath"
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

	// Cert without key is refused; missing files are reported.
	_, err = temporaladmin.Config{TLSCert: "a.pem"}.ClientOptions(nil)
	assert.Error(t, err)
	_, err = temporaladmin.Config{TLSCA: filepath.Join(t.TempDir(), "missing.pem")}.ClientOptions(nil)
	assert.Error(t, err)
	bad := filepath.Join(t.TempDir(), "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not pem"), 0o644))
	_, err = temporaladmin.Config{TLSCA: bad, TLSServerName: "x"}.ClientOptions(nil)
	assert.Error(t, err)
}
