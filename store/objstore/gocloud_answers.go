package objstore

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// The bodies of the answers of the S3, GCS and Azure servers, which their SDKs read whole: each
// is read up to a limit, and one byte more fails it (docs/STORAGE.md §4).

// maxErrorAnswer bounds an error answer's body: S3's, GCS's and Azure's own are a few hundred
// bytes.
const maxErrorAnswer = 64 << 10

// maxTokenAnswer bounds an answer to a credential's request (a token, an error, an identity
// provider's or metadata server's metadata): JSON of a few KB. Left to them, oauth2 reads up
// to 1 MiB, and GCE's metadata package and azidentity all, of an answer.
const maxTokenAnswer = 64 << 10

// tokenAnswers is the transport of a credential's requests, as an HTTP transport (RoundTrip:
// the gs:// token client, gceMetadata) or an azcore one (Do: the default Azure credential): it
// reads an answer's body whole up to maxTokenAnswer, refusing one byte more as the request's
// error, which neither oauth2, the GCS client nor azcore (azRefused) retries, and tells the
// credentials' wrapper: a refused answer's status and reason in last, if any (refusedTokens),
// an azure refusal to the request's azTokenCredential.
type tokenAnswers struct {
	next  func(*http.Request) (*http.Response, error) // a transport's RoundTrip, a client's Do
	last  *atomic.Pointer[serverRefusal]
	azure bool // a refusal is an azRefused, since azcore retries any other error
}

// Do is RoundTrip as azcore's transport.
func (t tokenAnswers) Do(req *http.Request) (*http.Response, error) { return t.RoundTrip(req) }

func (t tokenAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.last != nil {
		t.last.Store(nil) // a request answered with no refusal, or not at all, leaves none behind
	}
	resp, err := t.next(req)
	if err != nil {
		return resp, err
	}
	body, err := readWhole(resp, maxTokenAnswer, "answer to a token request")
	if err != nil && t.azure {
		if refused, ok := req.Context().Value(azTokenRefusedKey{}).(*atomic.Pointer[error]); ok {
			refused.Store(&err)
		}
		return nil, azRefused{err}
	}
	if err != nil {
		return nil, err
	}
	if t.last != nil && isTokenRefusal(resp.StatusCode) {
		t.last.Store(tokenRefusal(resp.StatusCode, tokenReason("", "", body)))
	}
	return resp, nil
}

// isErrorAnswer says whether resp is an error, as the AWS SDK, googleapi.CheckResponse and azcore
// tell one.
func isErrorAnswer(resp *http.Response) bool {
	return resp.StatusCode < 200 || resp.StatusCode >= 300
}

// readWhole replaces resp's body by its bytes, which it returns, failing with answerTooLarge
// past limit, having read at most limit+1 bytes, and at once, reading nothing, when the answer
// declares a longer Content-Length.
func readWhole(resp *http.Response, limit int64, what string) ([]byte, error) {
	if resp.ContentLength > limit {
		_ = resp.Body.Close()
		return nil, answerTooLarge{limit, what}
	}
	// Read as it comes, not into a buffer of the declared length: a check on the way (an
	// Azure page's entries) may refuse the answer long before its end.
	body, err := io.ReadAll(newBoundedBody(resp.Body, limit, what))
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	return body, nil
}

// newBoundedBody is body read up to limit (boundedBody).
func newBoundedBody(body io.ReadCloser, limit int64, what string) *boundedBody {
	return &boundedBody{ReadCloser: body, left: limit + 1, limit: limit, what: what}
}

// boundedBody reads at most limit+1 bytes of an answer's body, failing at the last.
type boundedBody struct {
	io.ReadCloser
	left, limit int64
	what        string
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, answerTooLarge{b.limit, b.what}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left == 0 {
		return n, answerTooLarge{b.limit, b.what}
	}
	return n, err
}

// answerTooLarge is an answer whose body outgrew its limit; a failure of the storage, which
// the SDK must not retry, since each retry would read as much again.
type answerTooLarge struct {
	limit int64
	what  string
}

func (e answerTooLarge) Error() string {
	return fmt.Sprintf("storage sent an %s longer than %d bytes", e.what, e.limit)
}

// RetryableError tells the AWS SDK's retryer not to retry (the GCS client retries no error
// of a round trip, storage.ShouldRetry).
func (answerTooLarge) RetryableError() bool { return false }
