package objstore

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/stretchr/testify/require"
	"gocloud.dev/blob"
)

// The count of a page's entries finds every start tag the XML decoder would take for a Blob
// or BlobPrefix, in any namespace and split across reads, and no other tag.
func TestAzEntryCountCountsBlobAndBlobPrefixTags(t *testing.T) {
	for page, want := range map[string]int{
		`<Blobs><Blob><Name>a</Name><Properties><BlobType>x</BlobType></Properties></Blob></Blobs>`: 1,
		`<Blobs><BlobPrefix><Name>a/</Name></BlobPrefix><Blob/><Blob ></Blob></Blobs>`:              3,
		`<x:Blobs><x:Blob></x:Blob><y:BlobPrefix>` + "<Blob\n>":                                     3,
		`<Blobs><Blobx/><BlobPrefixes/><xBlob/><Blobé/></Blobs>`:                                    0,
		`<Name>&lt;Blob&gt;</Name>`: 0,
	} {
		c := &azEntryCount{r: iotest.OneByteReader(strings.NewReader(page)), max: 1000}
		_, err := io.ReadAll(c)
		require.NoError(t, err, page)
		require.Equal(t, want, c.n, page)
	}
	c := &azEntryCount{r: strings.NewReader(`<Blob/><Blob/><Blob/>`), max: 2}
	_, err := io.ReadAll(c)
	require.ErrorIs(t, err, errBadListing)
}

// Every credential the opener chooses from the environment gives a client that talks through
// walkeeper's transport: an error answer past its limit fails once, whichever it is.
func TestAzOpenerBoundsEveryCredentialsAnswers(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(strings.Repeat("x", maxErrorAnswer+1)))
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	const account, key = "devstoreaccount1", "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	for kind, env := range map[string]map[string]string{
		"key": {"AZURE_STORAGE_ACCOUNT": account, "AZURE_STORAGE_KEY": key},
		"sas": {"AZURE_STORAGE_ACCOUNT": account, "AZURE_STORAGE_KEY": "", "AZURE_STORAGE_SAS_TOKEN": "sv=x&sig=y",
			"AZURE_STORAGE_DOMAIN": host, "AZURE_STORAGE_PROTOCOL": "http"},
		"connection string": {"AZURE_STORAGE_ACCOUNT": "", "AZURE_STORAGE_KEY": "",
			"AZURE_STORAGE_CONNECTION_STRING": "DefaultEndpointsProtocol=http;AccountName=" + account +
				";AccountKey=" + key + ";BlobEndpoint=" + srv.URL + "/" + account + ";"},
	} {
		t.Run(kind, func(t *testing.T) {
			for k, v := range env {
				t.Setenv(k, v)
			}
			require.Equal(t, kind, azCredFromEnv().kind)
			bkt := openAz(t, "azblob://b?protocol=http&domain="+host)
			requests.Store(0)
			_, err := bkt.ReadAll(context.Background(), "k")
			require.ErrorContains(t, err, "error answer longer than 65536 bytes")
			require.Equal(t, int64(1), requests.Load(), "a refused answer is not asked again")
		})
	}
}

// With a SAS token in the environment, a bucket URL may not send it to another origin, as
// gocloud's own opener refuses.
func TestAzOpenerKeepsTheSASTokenOnItsOrigin(t *testing.T) {
	t.Setenv("AZURE_STORAGE_ACCOUNT", "acct")
	t.Setenv("AZURE_STORAGE_KEY", "")
	t.Setenv("AZURE_STORAGE_SAS_TOKEN", "sv=x&sig=y")
	t.Setenv("AZURE_STORAGE_DOMAIN", "")
	t.Setenv("AZURE_STORAGE_PROTOCOL", "")
	o := &azOpener{}
	for _, raw := range []string{"azblob://b?domain=evil.example", "azblob://b?protocol=http",
		"azblob://b?storage_account=other"} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		_, err = o.OpenBucketURL(context.Background(), u)
		require.ErrorContains(t, err, "cannot change the service endpoint", raw)
	}
	u, _ := url.Parse("azblob://b?domain=blob.core.windows.net&protocol=https")
	bkt, err := o.OpenBucketURL(context.Background(), u)
	require.NoError(t, err)
	require.NoError(t, bkt.Close())
}

// openAz opens rawURL on a fresh opener, which reads the environment as it is now.
func openAz(t *testing.T, rawURL string) *blob.Bucket {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	bkt, err := new(azOpener).OpenBucketURL(context.Background(), u)
	require.NoError(t, err)
	t.Cleanup(func() { _ = bkt.Close() })
	return bkt
}

// An account host that does not resolve read as an empty bucket: azureblob takes any error
// whose text holds "no such host" for a missing object, so an existence check said false, a
// delete succeeded and a read failed not found. Each fails as a storage error naming the host,
// which still unwraps to the resolver's error, after azcore's retries (shortened here).
func TestAzureHostThatDoesNotResolveIsNotAnEmptyBucket(t *testing.T) {
	defer func(r policy.RetryOptions) { azRetry = r }(azRetry)
	azRetry = policy.RetryOptions{RetryDelay: time.Millisecond, MaxRetryDelay: time.Millisecond}
	const host = "devstoreaccount1.walkeeper-no-such-host.invalid" // .invalid never resolves
	b := mustOpen(t, "azblob://b?protocol=http&domain=walkeeper-no-such-host.invalid")
	ctx := context.Background()
	check := func(op string, err error) {
		t.Helper()
		require.Error(t, err, op)
		require.NotErrorIs(t, err, ErrNotFound, op)
		require.ErrorIs(t, err, errHostUnresolved, op)
		require.ErrorContains(t, err, host, op)
		require.NotContains(t, err.Error(), "no such host", op)
		var dnsErr *net.DNSError
		require.ErrorAs(t, err, &dnsErr, op)
	}
	ok, err := b.Exists(ctx, "p/a")
	require.False(t, ok)
	check("exists", err)
	check("delete", b.Delete(ctx, "p/a"))
	_, err = b.Get(ctx, "p/a")
	check("get", err)
	_, err = b.List(ctx, "p/")
	check("list", err)
}

// azDefaultCredentialEnv leaves the opener the default Azure credential, and that credential
// a managed identity whose token endpoint (App Service's, which may be plain HTTP) is endpoint.
func azDefaultCredentialEnv(t *testing.T, endpoint string) {
	t.Helper()
	for _, k := range []string{"AZURE_STORAGE_KEY", "AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING",
		"AZURE_STORAGEBLOB_CONNECTIONSTRING", "AZURE_TOKEN_CREDENTIALS", "AZURE_CLIENT_ID", "AZURE_TENANT_ID",
		"AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_FEDERATED_TOKEN_FILE",
		"IDENTITY_SERVER_THUMBPRINT", "MSI_ENDPOINT", "MSI_SECRET", "IMDS_ENDPOINT"} {
		t.Setenv(k, "") // restored after the test
		require.NoError(t, os.Unsetenv(k))
	}
	t.Setenv("IDENTITY_ENDPOINT", endpoint)
	t.Setenv("IDENTITY_HEADER", "h")
	require.Equal(t, "default", azCredFromEnv().kind)
}

// The default Azure credential's token requests went through azidentity's own HTTP client,
// which read an answer whole: a managed identity endpoint answering 64 MiB allocated about
// 330 MB per operation, and 2.2 GB on a 503, which it asks four times. Each answer to a
// credential's request is read up to 64 KiB, refused once, and the operation's error tells a
// refused answer.
func TestAzDefaultCredentialBoundsTokenAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB sent per operation")
	}
	chunk := []byte(strings.Repeat("x", 64<<10))
	for name, status := range map[string]int{"token of 64 MiB": http.StatusOK,
		"error answer of 64 MiB": http.StatusServiceUnavailable} {
		t.Run(name, func(t *testing.T) {
			var requests atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				w.Header().Set("Connection", "close") // the client stops reading mid-body
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				for range 1024 {
					if _, err := w.Write(chunk); err != nil {
						return
					}
				}
			}))
			defer srv.Close()
			azDefaultCredentialEnv(t, srv.URL)
			// The storage is never asked: the token comes first.
			bkt := openAz(t, "azblob://b?localemu=true&protocol=https&domain=127.0.0.1:1")
			var err error
			allocated := TotalAlloc(func() { _, err = bkt.ReadAll(context.Background(), "k") })
			t.Logf("%d bytes allocated", allocated)
			require.Less(t, allocated, uint64(16<<20), "bytes allocated")
			require.ErrorContains(t, err, "answer to a token request longer than 65536 bytes")
			reason, ok := RefusedAnswer(err)
			require.True(t, ok, "a refused answer: %v", err)
			require.Equal(t, RefusedTooLarge, reason)
			require.Equal(t, int64(1), requests.Load(), "a refused answer is not asked again")
		})
	}
}

// A token answer within the limit passes the bounded transport as before.
func TestAzDefaultCredentialGetsAToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-IDENTITY-HEADER") != "h" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"tok","expires_on":"` + strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10) +
			`","resource":"https://storage.azure.com","token_type":"Bearer"}`))
	}))
	defer srv.Close()
	azDefaultCredentialEnv(t, srv.URL)
	cred, err := azDefaultCredential()
	require.NoError(t, err)
	tk, err := cred.GetToken(context.Background(), policy.TokenRequestOptions{Scopes: []string{"https://storage.azure.com/.default"}})
	require.NoError(t, err)
	require.Equal(t, "tok", tk.Token)
}

// TotalAlloc returns the bytes the process allocated while fn ran; exported for the external
// tests of this package too.
func TotalAlloc(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
