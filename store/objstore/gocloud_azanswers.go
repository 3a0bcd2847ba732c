package objstore

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"gocloud.dev/blob"
	"gocloud.dev/blob/azureblob"
	"golang.org/x/net/http2"
)

// What walkeeper reads of an Azure answer, since azcore reads every answer's body whole but an
// object's bytes (its body download policy, the last before the transport, so no policy of
// walkeeper's sees an answer before it is read) and the driver decodes a list page whole
// (docs/STORAGE.md §4).
const (
	// maxAzureListAnswer bounds one List Blobs page's body: a page holds at most the 1,000
	// entries gocloud asks (maxresults), and an entry is its name, at most 1,024 characters and
	// 9 bytes a character when Azure percent-encodes it (Encoded="true"), and about 1 KB of
	// properties, so about 10 MB; a page of walkeeper's own keys is about 1 MB.
	maxAzureListAnswer = 16 << 20
	// azureMaxResults is the page size Azure gives a List Blobs request that asks none.
	azureMaxResults = 5000
	// azureApplicationID is the telemetry ID gocloud's azureblob (v0.47.0) gives its clients,
	// which walkeeper's opener keeps: it prefixes every request's User-Agent.
	azureApplicationID = "go-cloud/blob/0.47.0"
)

// azOpener is azureblob's own URL opener (v0.47.0, lazyOpener and credInfoT.NewClient) with
// every container client it makes talking through azAnswers; the credentials are chosen from
// the environment once, at the first open in the process, as azureblob's are.
type azOpener struct {
	init   sync.Once
	opener *azureblob.URLOpener
}

func (o *azOpener) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	o.init.Do(func() {
		cred := azCredFromEnv()
		o.opener = &azureblob.URLOpener{
			MakeClient:        cred.newClient,
			ServiceURLOptions: *azureblob.NewDefaultServiceURLOptions(),
		}
		if o.opener.ServiceURLOptions.SASToken != "" {
			defaults := o.opener.ServiceURLOptions
			o.opener.MakeClient = func(svcURL azureblob.ServiceURL, name azureblob.ContainerName) (*container.Client, error) {
				if err := sameAzureOrigin(&defaults, svcURL); err != nil {
					return nil, err
				}
				return cred.newClient(svcURL, name)
			}
		}
	})
	return o.opener.OpenBucketURL(ctx, u)
}

// sameAzureOrigin refuses a service URL, built from a bucket URL's parameters, whose scheme or
// host is not the one the environment names: the SAS token is part of the service URL, and a
// URL must not send it to another origin.
func sameAzureOrigin(defaults *azureblob.ServiceURLOptions, svcURL azureblob.ServiceURL) error {
	want, err := azureblob.NewServiceURL(defaults)
	if err != nil {
		return err
	}
	a, err := url.Parse(string(want))
	if err != nil {
		return err
	}
	b, err := url.Parse(string(svcURL))
	if err != nil {
		return err
	}
	if !strings.EqualFold(a.Scheme, b.Scheme) || !strings.EqualFold(a.Host, b.Host) {
		return errors.New("azureblob: bucket URL cannot change the service endpoint when AZURE_STORAGE_SAS_TOKEN is set")
	}
	return nil
}

// azCred is the credential azureblob chooses from the environment, in its order: a shared
// key, a SAS token (in the service URL), a connection string, the default Azure credential.
type azCred struct {
	kind             string // "key", "sas", "connection string" or "default"
	account, key     string
	connectionString string
}

func azCredFromEnv() azCred {
	c := azCred{account: os.Getenv("AZURE_STORAGE_ACCOUNT"), key: os.Getenv("AZURE_STORAGE_KEY")}
	conn := cmp.Or(os.Getenv("AZURE_STORAGE_CONNECTION_STRING"),
		os.Getenv("AZURE_STORAGEBLOB_CONNECTIONSTRING"))
	switch {
	case c.account != "" && c.key != "":
		c.kind = "key"
	case os.Getenv("AZURE_STORAGE_SAS_TOKEN") != "":
		c.kind = "sas"
	case conn != "":
		c.kind, c.connectionString = "connection string", conn
	default:
		c.kind = "default"
	}
	return c
}

// newClient is azureblob's credInfoT.NewClient with walkeeper's transport in the options.
func (c azCred) newClient(svcURL azureblob.ServiceURL, name azureblob.ContainerName) (*container.Client, error) {
	opts := &container.ClientOptions{}
	opts.Telemetry = policy.TelemetryOptions{ApplicationID: azureApplicationID}
	opts.Transport = azAnswers{next: azHTTPClient()}
	opts.Retry = azRetry
	containerURL, err := url.JoinPath(string(svcURL), string(name))
	if err != nil {
		return nil, err
	}
	switch c.kind {
	case "key":
		cred, err := azblob.NewSharedKeyCredential(c.account, c.key)
		if err != nil {
			return nil, fmt.Errorf("failed azblob.NewSharedKeyCredential: %w", err)
		}
		return container.NewClientWithSharedKeyCredential(containerURL, cred, opts)
	case "sas":
		return container.NewClientWithNoCredential(containerURL, opts)
	case "connection string":
		return container.NewClientFromConnectionString(c.connectionString, string(name), opts)
	default:
		cred, err := azDefaultCredential()
		if err != nil {
			return nil, err
		}
		return container.NewClient(containerURL, cred, opts)
	}
}

// azDefaultCredential is the default Azure credential azureblob makes, with azidentity's
// default options but the transport: every credential of its chain that asks over HTTP (the
// environment's service principal, workload identity, managed identity and its IMDS probe)
// talks through tokenAnswers, keeping azidentity's own retry policy; the Azure CLI,
// Developer CLI and PowerShell are processes, not HTTP.
func azDefaultCredential() (azcore.TokenCredential, error) {
	cred, err := azidentity.NewDefaultAzureCredential(&azidentity.DefaultAzureCredentialOptions{
		ClientOptions: azcore.ClientOptions{Transport: tokenAnswers{next: azHTTPClient().Do, azure: true}},
	})
	if err != nil {
		return nil, fmt.Errorf("failed azidentity.NewDefaultAzureCredential: %w", err)
	}
	return azTokenCredential{cred}, nil
}

// azTokenRefusedKey is the context key under which azTokenCredential.GetToken hands its
// token requests the place of their refusal.
type azTokenRefusedKey struct{}

// azTokenCredential is a credential whose failure on an answer tokenAnswers refused unwraps
// to that refusal: azidentity keeps a transport's error as text only, and the operation's
// error must still tell a refused answer (RefusedAnswer).
type azTokenCredential struct {
	cred azcore.TokenCredential
}

func (c azTokenCredential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	var refused atomic.Pointer[error]
	tk, err := c.cred.GetToken(context.WithValue(ctx, azTokenRefusedKey{}, &refused), opts)
	if r := refused.Load(); err != nil && r != nil {
		err = &azTokenRefusedError{err: err, refusal: *r}
	}
	return tk, err
}

// azTokenRefusedError is a credential's error with the refusal it came of, which its text
// already tells.
type azTokenRefusedError struct {
	err, refusal error
}

func (e *azTokenRefusedError) Error() string   { return e.err.Error() }
func (e *azTokenRefusedError) Unwrap() []error { return []error{e.err, e.refusal} }

// azRetry is every container client's retry policy: azcore's default (3 retries, 0.8 s doubling
// with jitter), which a test shortens.
var azRetry policy.RetryOptions

// azHTTPClient is the one HTTP client of every container client, built as azcore's shared
// default one (azcore v1.23.1, runtime/transport_default_http_client.go), which a transport of
// walkeeper's replaces.
var azHTTPClient = sync.OnceValue(func() *http.Client {
	t := &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   10,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		TLSClientConfig: &tls.Config{
			MinVersion:    tls.VersionTLS12,
			Renegotiation: tls.RenegotiateFreelyAsClient,
		},
	}
	if h2, err := http2.ConfigureTransports(t); err == nil {
		// As azcore: a connection idle for 10 s is pinged, and closed without an answer in 5 s.
		h2.ReadIdleTimeout = 10 * time.Second
		h2.PingTimeout = 5 * time.Second
	}
	return &http.Client{Transport: t}
})

// azAnswers is an azcore transport that reads an answer's body before azcore does: an error
// answer's up to maxErrorAnswer, a List Blobs page's up to maxAzureListAnswer and no more
// entries than it asked for (maxresults), and any other answer but an object's bytes (a put's,
// a delete's, whose body Azure leaves empty) up to maxErrorAnswer. A refused answer is the
// request's error, which azcore's retry policy does not retry (azRefused), since each retry
// would read as much again.
type azAnswers struct {
	next policy.Transporter
}

func (t azAnswers) Do(req *http.Request) (*http.Response, error) {
	resp, err := t.next.Do(req)
	if err != nil {
		if errors.As(err, new(*net.DNSError)) {
			return resp, &hostUnresolvedError{host: req.URL.Hostname(), err: err}
		}
		return resp, err
	}
	q := req.URL.Query()
	switch {
	case isErrorAnswer(resp):
		_, err = readWhole(resp, maxErrorAnswer, "error answer")
	case q.Get("comp") == "list":
		err = readAzureListPage(resp, q)
	case req.Method == http.MethodGet && !q.Has("comp") && !q.Has("restype"):
		return resp, nil // an object's bytes, which the reader streams and walkeeper bounds
	case req.Method == http.MethodHead:
		return resp, nil // no body (HTTP); its Content-Length is the object's
	default:
		_, err = readWhole(resp, maxErrorAnswer, "answer")
	}
	if err != nil {
		return nil, azRefused{err}
	}
	return resp, nil
}

// readAzureListPage replaces resp's body by its bytes, failing past maxAzureListAnswer bytes
// or past the entries the request asked for, as soon as either is read: the driver decodes the
// page whole, about 4 KB an entry, and Azure sends at most maxresults entries.
func readAzureListPage(resp *http.Response, q url.Values) error {
	asked, err := strconv.Atoi(q.Get("maxresults"))
	if err != nil || asked <= 0 || asked > azureMaxResults {
		asked = azureMaxResults
	}
	counted := &azEntryCount{r: resp.Body, max: asked}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{counted, resp.Body}
	_, err = readWhole(resp, maxAzureListAnswer, "answer")
	return err
}

// azEntryCount reads r, failing once it has read more than max start tags named Blob or
// BlobPrefix (the entries of a page, in any namespace): it counts every such tag, wherever
// it stands, so it never counts fewer entries than the driver's XML decoder finds.
type azEntryCount struct {
	r       io.Reader
	max, n  int
	inTag   bool
	name    [len("BlobPrefix")]byte
	nameLen int // of the tag's name after its last ':', which may outgrow name
}

func (c *azEntryCount) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	for _, b := range p[:n] {
		if c.inTag {
			switch {
			case b == ':':
				c.nameLen = 0
				continue
			case isXMLNameByte(b):
				if c.nameLen < len(c.name) {
					c.name[c.nameLen] = b
				}
				c.nameLen++
				continue
			}
			c.inTag = false
			if local := string(c.name[:min(c.nameLen, len(c.name))]); c.nameLen <= len(c.name) &&
				(local == "Blob" || local == "BlobPrefix") {
				if c.n++; c.n > c.max {
					return n, fmt.Errorf("%w: more entries than the %d its request asked for",
						errBadListing, c.max)
				}
			}
		}
		if b == '<' {
			c.inTag, c.nameLen = true, 0
		}
	}
	return n, err
}

// isXMLNameByte reports a byte encoding/xml reads as part of a name (any byte of a multi-byte
// character too).
func isXMLNameByte(b byte) bool {
	return b >= 0x80 || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '_' || b == ':' || b == '.' || b == '-'
}

// azRefused is an answer azAnswers refused; azcore's retry policy does not retry an error
// with a NonRetriable method (azcore's errorinfo.NonRetriable).
type azRefused struct{ err error }

func (e azRefused) Error() string { return e.err.Error() }
func (e azRefused) Unwrap() error { return e.err }
func (azRefused) NonRetriable()   {}

// errHostUnresolved is a storage host whose name did not resolve, which azureblob took for a
// missing object by the resolver's text (docs/RELIABILITY.md finding 127); azcore retries it
// within its bounded policy, since a lookup may fail briefly.
var errHostUnresolved = errors.New("lookup failed")

// hostUnresolvedError is errHostUnresolved naming the host, with a text that leaves out the
// resolver's own ("no such host"), and that unwraps to the round trip's error too, so that
// errors.As still finds its *net.DNSError.
type hostUnresolvedError struct {
	host string
	err  error
}

func (e *hostUnresolvedError) Error() string {
	return fmt.Sprintf("storage host %q did not resolve: %v", e.host, errHostUnresolved)
}
func (e *hostUnresolvedError) Unwrap() []error { return []error{errHostUnresolved, e.err} }
