package objstore

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/compute/metadata"

	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/api/option"
)

// What walkeeper reads of a GCS answer, since the GCS client reads an error answer whole,
// decodes an upload's answer on a goroutine of its own, where a nil dereference ends the
// process, and believes any 200 to a listing (docs/STORAGE.md §4).
const (
	// maxGCSJSONAnswer bounds a JSON API answer's body, which is checked whole before the client
	// decodes it: an object resource is a few KB, and a list page of 1,000 entries (gcsblob's
	// page size) about 1.5 KB each for walkeeper's keys; GCS's longest names (1,024 bytes),
	// written in the four fields that repeat them, make a page of 4 to 12 MB.
	maxGCSJSONAnswer = 16 << 20
	// maxGCSReadReopens bounds the reopenings of one read's object body, which the GCS client
	// reopens at once, without backoff or limit (docs/RELIABILITY.md finding 120); a sound
	// server's body breaks once in a long while, not four times in one read.
	maxGCSReadReopens = 4
)

// gcsOpener is gcsblob's own URL opener (v0.47.0, lazyCredsOpener) with every HTTP client it
// builds checking its answers (gcsAnswers); it leaves out only what signs URLs, which
// walkeeper never does.
type gcsOpener struct {
	mu      sync.Mutex
	openers map[string]*gcsblob.URLOpener // by universe_domain
}

func (o *gcsOpener) OpenBucketURL(ctx context.Context, u *url.URL) (*blob.Bucket, error) {
	q := u.Query()
	opener, err := o.forUniverse(ctx, q.Get("universe_domain"))
	if err != nil {
		return nil, fmt.Errorf("open bucket %v: %w", u, err)
	}
	withURL := *opener
	anon, _ := strconv.ParseBool(q.Get("anonymous")) // as gcsblob reads it, which refuses a bad value
	if os.Getenv("STORAGE_EMULATOR_HOST") != "" || anon || q.Get("access_id") == "-" {
		// gcsblob then talks through a plain client of its own (http.DefaultClient, or an
		// anonymous one); an HTTP client option, applied after its own, replaces it.
		plain := &http.Client{Transport: gcsAnswers{next: gcp.DefaultTransport()}}
		cached := slices.Clip(withURL.Options.ClientOptions) // the append must not reach the cache
		withURL.Options.ClientOptions = append(cached, option.WithHTTPClient(plain))
	}
	return withURL.OpenBucketURL(ctx, u)
}

// gcsOverGRPC names the parameter of a URL that asks gcsblob for the gRPC API (zonal=true
// implies it), which walkeeper refuses: gcsAnswers checks the JSON API's answers, and over
// gRPC none would be checked.
func gcsOverGRPC(q url.Values) (param string, on bool) {
	for _, param := range []string{"grpc", "zonal"} {
		if on, _ := strconv.ParseBool(q.Get(param)); on {
			return param, true
		}
	}
	return "", false
}

// forUniverse loads the credentials for universeDomain once, as gcsblob's opener does.
func (o *gcsOpener) forUniverse(ctx context.Context, universeDomain string) (
	*gcsblob.URLOpener, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if opener, ok := o.openers[universeDomain]; ok {
		return opener, nil
	}
	var opts gcsblob.Options
	var creds *google.Credentials
	// The credentials keep this context and fetch every token through its client, which
	// tells their token source (refusedTokens) whether the last answer it read was a refusal.
	lastRefusal := new(atomic.Pointer[serverRefusal])
	ctx = context.WithValue(ctx, oauth2.HTTPClient, gcsTokenClient(lastRefusal))
	if os.Getenv("STORAGE_EMULATOR_HOST") != "" || os.Getenv("STORAGE_EMULATOR_HOST_GRPC") != "" {
		dummy := `{"type": "service_account", "project_id": "my-project-id"}`
		creds, _ = google.CredentialsFromJSON(ctx, []byte(dummy))
	} else {
		var err error
		if os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") == "" && os.Getenv(gceMetadataHostEnv) != "" {
			// Application Default Credentials read the project ID from the metadata server
			// through its package's own client, unbounded, unless its cache holds it: fill the
			// cache through a bounded client, and load no credentials from a server past it.
			if _, err = gceMetadata.ProjectIDWithContext(ctx); !errors.As(err, new(answerTooLarge)) {
				err = nil
			}
		}
		if err == nil {
			// With no universe domain this is gcp.DefaultCredentials, which gcsblob then calls.
			params := google.CredentialsParams{UniverseDomain: universeDomain}
			creds, err = gcp.DefaultCredentialsWithParams(ctx, params)
		}
		if err != nil {
			// As gocloud: empty credentials, so that the first request, not the open, fails.
			creds, _ = google.CredentialsFromJSON(ctx, []byte(`{"type": "service_account"}`))
		}
		if creds.JSON == nil {
			// The metadata server's (GCE, Cloud Run, GKE): oauth2 asks it through the metadata
			// package's own client, which reads an answer whole.
			creds.TokenSource = oauth2.ReuseTokenSource(nil, gceTokens{})
			creds.UniverseDomainProvider = gceUniverseDomain
		}
		if ud, err := creds.GetUniverseDomain(); err == nil && ud != "" {
			opts.ClientOptions = append(opts.ClientOptions, option.WithUniverseDomain(ud))
		}
	}
	// Reused, so that a request with a valid token takes one lock as before, not
	// refusedTokens' look at the last answer.
	tokens := oauth2.ReuseTokenSource(nil, &refusedTokens{src: creds.TokenSource, last: lastRefusal})
	client, err := gcp.NewHTTPClient(gcsAnswers{next: gcp.DefaultTransport()}, tokens)
	if err != nil {
		return nil, err // not cached, unlike gocloud's: nothing of it is worth keeping
	}
	// No TokenSource, which only grpc=true would use: gcsblob then refuses it at open, should
	// it get past checkGocloudParams.
	opener := &gcsblob.URLOpener{Client: client, Options: opts}
	o.openers[universeDomain] = opener
	return opener, nil
}

// tokenTimeout bounds a token request, which the credentials send with the context they were
// loaded with, not the operation's: a token endpoint answers in well under a second.
const tokenTimeout = 30 * time.Second

// gcsTokenClient is the HTTP client of every token request of one set of gs:// credentials
// (forUniverse), which oauth2 takes from the context the credentials keep, storing each
// refused answer in last. It is the client, not the request's context, that tells the
// answer: oauth2 sends a service account's token request without the credentials' context.
func gcsTokenClient(last *atomic.Pointer[serverRefusal]) *http.Client {
	return &http.Client{Transport: tokenAnswers{next: gcp.DefaultTransport().RoundTrip, last: last},
		Timeout: tokenTimeout}
}

// gceMetadataHostEnv names the metadata server's host in place of 169.254.169.254
// (cloud.google.com/go/compute/metadata).
const gceMetadataHostEnv = "GCE_METADATA_HOST"

// gceMetadata is a metadata client whose answers are bounded, on a transport like the
// metadata package's own: without a proxy, which must not see the server's tokens.
var gceMetadata = metadata.NewClient(&http.Client{
	Transport: tokenAnswers{next: (&http.Transport{
		DialContext:     (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		IdleConnTimeout: 60 * time.Second,
	}).RoundTrip},
	Timeout: 5 * time.Second, // as the metadata package's client
})

// gceTokens is oauth2's computeSource (v0.37.0) asking through gceMetadata: the metadata
// server's token for the instance's default service account, of the scope gocloud's
// gcp.DefaultCredentials asks for.
type gceTokens struct{}

func (gceTokens) Token() (*oauth2.Token, error) {
	uri := "instance/service-accounts/default/token?" +
		url.Values{"scopes": {"https://www.googleapis.com/auth/cloud-platform"}}.Encode()
	answer, err := gceMetadata.GetWithContext(context.Background(), uri)
	if err != nil {
		return nil, err
	}
	var tok oauth2.Token
	if err := json.Unmarshal([]byte(answer), &tok); err != nil {
		return nil, fmt.Errorf("oauth2/google: invalid token JSON from metadata: %w", err)
	}
	if tok.ExpiresIn <= 0 || tok.AccessToken == "" {
		return nil, errors.New("oauth2/google: incomplete token received from metadata")
	}
	return &oauth2.Token{AccessToken: tok.AccessToken, TokenType: tok.TokenType,
		Expiry: time.Now().Add(time.Duration(tok.ExpiresIn) * time.Second)}, nil
}

// gceUniverseDomain is oauth2's universe domain of metadata credentials (v0.37.0) asking
// through gceMetadata: googleapis.com when the server defines none.
func gceUniverseDomain() (string, error) {
	ud, err := gceMetadata.GetWithContext(context.Background(), "universe/universe-domain")
	if errors.As(err, new(metadata.NotDefinedError)) {
		return "googleapis.com", nil
	}
	return ud, err
}

// gcsAnswers is an HTTP transport that reads an error answer's body up to maxErrorAnswer
// and a JSON API answer's up to maxGCSJSONAnswer, checking the latter (checkGCSAnswer), before
// the GCS client sees either. A refused answer is the round trip's error, which the client
// does not retry (storage.ShouldRetry), since each retry would read as much again.
type gcsAnswers struct {
	next http.RoundTripper
}

func (t gcsAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	read, _ := req.Context().Value(gcsReadKey{}).(*gcsRead)
	if read != nil && !isGCSJSONAPI(req.URL) && read.failed.Load() > maxGCSReadReopens {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, fmt.Errorf("%w: an object's body broke off %d times in one read",
			errBadAnswer, read.failed.Load())
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	var body []byte
	switch {
	case isErrorAnswer(resp):
		body, err = readWhole(resp, maxErrorAnswer, "error answer")
		if err == nil && resp.StatusCode == http.StatusForbidden {
			err = gcsForbidden(body)
		}
	case isGCSJSONAPI(req.URL):
		if body, err = readWhole(resp, maxGCSJSONAnswer, "answer"); err == nil {
			err = checkGCSAnswer(req, body)
		}
	default:
		if read != nil { // an object's bytes, which the reader streams
			resp.Body = &gcsReadBody{ReadCloser: resp.Body, read: read}
		}
		return resp, nil
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// gcsReadKey keys the *gcsRead of one read in its context, which the GCS client passes to
// every request of the read, its reopenings too.
type gcsReadKey struct{}

// gcsRead counts the object bodies of one read that broke off, each of which the GCS client
// reopens (storage's httpReader.Read) with a request the transport cannot tell from the
// first: an object read from its start asks for no range.
type gcsRead struct {
	failed atomic.Int32
}

// gcsReadBody is an object's body that counts, in its read, its breaking off: any error but
// io.EOF, on which the GCS client reopens the body.
type gcsReadBody struct {
	io.ReadCloser
	read   *gcsRead
	failed bool
}

func (b *gcsReadBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && !b.failed {
		b.failed = true
		b.read.failed.Add(1)
	}
	return n, err
}

// errAccessRefused is a GCS 403, which GCS sends only to a caller not allowed to see whether
// an object exists and gcsblob takes for not found (docs/RELIABILITY.md finding 126). As the
// round trip's error it is a failure of the storage, which the client does not retry, like an
// S3 AccessDenied.
var errAccessRefused = errors.New("storage refused access (HTTP 403)")

// gcsForbidden is errAccessRefused with GCS's reason, from a JSON API error or an XML one
// (an object's read); the body is already bounded.
func gcsForbidden(body []byte) error {
	var j struct{ Error struct{ Message string } }
	var x struct{ Message, Details string }
	reason := ""
	if json.Unmarshal(body, &j) == nil {
		reason = j.Error.Message
	} else if xml.Unmarshal(body, &x) == nil {
		reason = strings.TrimSpace(x.Message + " " + x.Details)
	}
	return &serverRefusal{kind: errAccessRefused, whose: "GCS's", reason: cutReason(reason)}
}

// cutReason cuts a server's reason to maxGCSReason bytes.
func cutReason(reason string) string {
	if len(reason) > maxGCSReason {
		return strings.ToValidUTF8(reason[:maxGCSReason], "") + "…"
	}
	return reason
}

// errCredentialsRefused is a token endpoint's refusal of gs:// credentials: a 4xx other than
// 408 and 429 (a revoked or badly signed grant, an unknown account, a wrong token_uri), which
// asking again cannot mend.
var errCredentialsRefused = errors.New("storage credentials were refused by their token endpoint")

// serverRefusal is errAccessRefused or errCredentialsRefused with the server's reason, which
// its text leaves out: the GCS client retries an error whose text holds "connection reset" or
// the like (storage.ShouldRetry), so a reason saying so was asked again until the stall
// timeout. It wraps nothing, so that the client finds neither a token answer's body nor
// oauth2's Temporary under it; withGCSReason puts the reason back once the error has left the
// client.
type serverRefusal struct {
	kind   error  // errAccessRefused or errCredentialsRefused
	status int    // a token answer's, in the text; 0 for GCS's 403, whose kind says it
	whose  string // whose reason it is
	reason string // cut to maxGCSReason bytes
}

func (e *serverRefusal) Error() string {
	if e.status == 0 {
		return e.kind.Error()
	}
	return fmt.Sprintf("%v (HTTP %d)", e.kind, e.status)
}

func (e *serverRefusal) Is(target error) bool { return target == e.kind }

// tokenRefusal is errCredentialsRefused for a token answer of status, with the endpoint's
// reason.
func tokenRefusal(status int, reason string) *serverRefusal {
	return &serverRefusal{kind: errCredentialsRefused, status: status,
		whose: "the token endpoint's", reason: cutReason(reason)}
}

// refusedTokens is a token source whose refusals (a 4xx other than 408 and 429, from a token
// endpoint through oauth2, an external account's token exchange, an impersonation, or from
// the metadata server) fail as a tokenRefusal; any other error is left as it is, for the GCS
// client to retry a 5xx or a broken connection as before.
//
// REQUIRES: Token is called through oauth2.ReuseTokenSource, which holds a lock over each
// fetch, so that the last answer is this fetch's.
type refusedTokens struct {
	src  oauth2.TokenSource
	last *atomic.Pointer[serverRefusal] // the refusal of the credentials' last token request (tokenAnswers)
}

func (s *refusedTokens) Token() (*oauth2.Token, error) {
	s.last.Store(nil)
	tok, err := s.src.Token()
	if err == nil {
		return tok, nil
	}
	var retrieve *oauth2.RetrieveError
	var gce *metadata.Error
	switch {
	case errors.As(err, &retrieve) && retrieve.Response != nil &&
		isTokenRefusal(retrieve.Response.StatusCode):
		return nil, tokenRefusal(retrieve.Response.StatusCode,
			tokenReason(retrieve.ErrorCode, retrieve.ErrorDescription, retrieve.Body))
	case errors.As(err, &gce) && isTokenRefusal(gce.Code):
		return nil, tokenRefusal(gce.Code, strings.TrimSpace(gce.Message))
	}
	// An error oauth2 (v0.37.0) made text of (a token exchange's or an impersonation's,
	// `oauth2/google: status code 400: <body>`, or a RetrieveError it wrapped with %v), after
	// a request whose answer was a refusal: no request follows a refused one in a token fetch,
	// so that answer is the failure.
	if last := s.last.Load(); last != nil {
		return nil, last
	}
	return nil, err
}

// isTokenRefusal reports a token answer's status that asking again cannot change; 408 and 429
// ask the caller to come back, as the GCS client does for them.
func isTokenRefusal(status int) bool {
	return status >= 400 && status < 500 &&
		status != http.StatusRequestTimeout && status != http.StatusTooManyRequests
}

// tokenReason is a token endpoint's reason: code and desc, an OAuth 2.0 error's "error" and
// "error_description" (RFC 6749 §5.2), which oauth2 parses for some grants only (not a service
// account's) and from a form answer too, else the reason in an error answer's body (bounded by
// tokenAnswers): an OAuth 2.0 error's (a token exchange's), a Google API error's message (an
// impersonation's), else the body.
func tokenReason(code, desc string, body []byte) string {
	var oauth struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	var google struct{ Error struct{ Message string } }
	switch {
	case code != "":
	case json.Unmarshal(body, &oauth) == nil && oauth.Error != "":
		code, desc = oauth.Error, oauth.Description
	case json.Unmarshal(body, &google) == nil && google.Error.Message != "":
		return google.Error.Message
	default:
		return strings.TrimSpace(string(body))
	}
	if desc == "" {
		return code
	}
	return code + ": " + desc
}

// withGCSReason adds to err the server's reason of the refusal it holds, if any, quoted: one
// line, whatever it holds.
func withGCSReason(err error) error {
	var refusal *serverRefusal
	if !errors.As(err, &refusal) || refusal.reason == "" {
		return err
	}
	return fmt.Errorf("%w; %s reason: %q", err, refusal.whose, refusal.reason)
}

// maxGCSReason bounds the reason a refusal puts in its error: GCS's names a principal and a
// permission in a few hundred bytes, a token endpoint's an error code and a sentence.
const maxGCSReason = 512

// isGCSJSONAPI reports a request of the JSON API (metadata, listings, uploads) other than a
// download of an object's bytes.
func isGCSJSONAPI(u *url.URL) bool {
	return strings.Contains(u.Path, "/storage/v1/") && u.Query().Get("alt") != "media"
}

// checkGCSAnswer refuses what the GCS client would take for a listing or dereference: an
// answer to an objects.list that is not a storage#objects (a 200 holding an error document
// decodes as an empty page) or holds more items than it asked for, and a null item or ACL
// entry (storage.newObject dereferences each ACL entry, on the upload's own goroutine for an
// upload's answer). An answer that is not JSON is left to the client's decoder, which fails
// it.
func checkGCSAnswer(req *http.Request, body []byte) error {
	if len(body) == 0 {
		return nil // a delete's 204, a resumable upload's start
	}
	var a struct {
		Kind          string
		ACL           []*struct{}
		Items         []*struct{ ACL []*struct{} }
		Prefixes      []json.RawMessage
		NextPageToken string
	}
	if json.Unmarshal(body, &a) != nil {
		return nil
	}
	listing := req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/o")
	if listing && a.Kind != "storage#objects" {
		return fmt.Errorf("%w: kind %.64q, not storage#objects", errBadListing, a.Kind)
	}
	// The client decodes a page's items whole, about 1.6 KB an item however short its name,
	// so they are held to the maxResults asked; its prefixes are strings, bounded by the
	// answer's size, and fake-gcs-server sends them all in one page.
	asked, err := strconv.Atoi(req.URL.Query().Get("maxResults"))
	if listing && err == nil && len(a.Items) > asked {
		return fmt.Errorf("%w: %d items in a page of at most %d", errBadListing, len(a.Items), asked)
	}
	for _, item := range a.Items {
		if item == nil {
			return fmt.Errorf("%w: a null item", errBadListing)
		}
		if slices.Contains(item.ACL, nil) {
			return fmt.Errorf("%w: an item's acl holds null", errBadListing)
		}
	}
	if slices.Contains(a.ACL, nil) {
		return fmt.Errorf("%w: its acl holds null", errBadAnswer)
	}
	if listing {
		return emptyGCSAnswer(req.Context(), len(a.Items)+len(a.Prefixes), a.NextPageToken != "")
	}
	return nil
}
