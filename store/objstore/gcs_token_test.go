package objstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// serviceAccountAt writes a service account key file whose token_uri is tokenURI, names it
// in GOOGLE_APPLICATION_CREDENTIALS and clears the emulator setting, under which the opener
// loads no credentials.
func serviceAccountAt(t *testing.T, tokenURI string) {
	t.Helper()
	credentialsAt(t, serviceAccount(t, tokenURI))
}

// serviceAccount is a service account key whose token_uri is tokenURI.
func serviceAccount(t *testing.T, tokenURI string) map[string]any {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	return map[string]any{
		"type": "service_account", "project_id": "p", "private_key_id": "k",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "sa@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenURI,
	}
}

// credentialsAt writes creds to a file, names it in GOOGLE_APPLICATION_CREDENTIALS and clears
// the emulator setting, under which the opener loads no credentials.
func credentialsAt(t *testing.T, creds map[string]any) {
	t.Helper()
	j, err := json.Marshal(creds)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "credentials.json")
	require.NoError(t, os.WriteFile(path, j, 0o600))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", path)
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	require.NoError(t, os.Unsetenv("STORAGE_EMULATOR_HOST"))
}

// hugeTokenAnswer answers a token request with status and a body of 64 MiB, counting its
// requests in requests.
func hugeTokenAnswer(status int, requests *atomic.Int64) http.HandlerFunc {
	chunk := []byte(strings.Repeat("x", 64<<10))
	return func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Connection", "close")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"access_token":"`))
		for range 1024 {
			if _, err := w.Write(chunk); err != nil {
				return // the client stopped reading
			}
		}
	}
}

// requireTokenAnswerRefusedOnce opens bucket "b" in a universe of its own (the opener loads
// the credentials once per universe) and checks that an existence check, whose token request
// is answered with 64 MiB, fails on the answer's limit after one token request, having
// allocated less than 1 MiB.
func requireTokenAnswerRefusedOnce(t *testing.T, universe string, requests *atomic.Int64) {
	t.Helper()
	b := open(t, "gs://b?universe_domain="+universe).WithStallTimeout(3 * time.Second)
	requests.Store(0)
	var err error
	start := time.Now()
	allocated := objstore.TotalAlloc(func() { _, err = b.Exists(context.Background(), "p/a") })
	t.Logf("%d token requests, %d bytes allocated in %v: %.300v", requests.Load(), allocated,
		time.Since(start), err)
	require.ErrorContains(t, err, "answer to a token request longer than 65536 bytes")
	require.Less(t, allocated, uint64(1<<20), "bytes allocated")
	require.Equal(t, int64(1), requests.Load(), "a refused token answer is not asked again")
}

// A service account's token request went through oauth2's own client, which reads up to
// 1 MiB of the answer and puts it into its error's text; the GCS client retries a token
// request answered 503, so a token endpoint answering 503 with 64 MiB was asked again until
// --storage-stall-timeout (3 requests and 131 MB allocated in a stall timeout of 3 s). Token
// requests now go through a client that refuses an answer past 64 KiB, which is not retried.
func TestGCSTokenAnswerIsReadUpToALimit(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var requests atomic.Int64
			srv := httptest.NewServer(hugeTokenAnswer(status, &requests))
			t.Cleanup(srv.Close)
			serviceAccountAt(t, srv.URL+"/token")
			requireTokenAnswerRefusedOnce(t, fmt.Sprintf("sa%d.invalid", status), &requests)
		})
	}
}

// gceProcessEnv names the test a child process of the test binary runs (inGCEProcess).
const gceProcessEnv = "WALKEEPER_TEST_GCE_PROCESS"

// inGCEProcess reports whether t runs in a process of its own, and if not runs t in one and
// reports its outcome: the metadata package decides once a process whether it runs on GCE
// (a gs:// open of an earlier test, without GCE_METADATA_HOST, decided no) and keeps the
// first project ID it reads.
func inGCEProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(gceProcessEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), gceProcessEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("in a process of its own: %v\n%s", err, out)
	}
	t.Logf("in a process of its own:\n%s", out)
	return false
}

// gceMetadataAt names srv in GCE_METADATA_HOST, with no other credentials to find.
func gceMetadataAt(t *testing.T, srv *httptest.Server) {
	t.Helper()
	t.Setenv("GCE_METADATA_HOST", strings.TrimPrefix(srv.URL, "http://"))
	t.Setenv("HOME", t.TempDir()) // no gcloud credentials file
	for _, env := range []string{"GOOGLE_APPLICATION_CREDENTIALS", "STORAGE_EMULATOR_HOST"} {
		t.Setenv(env, "")
		require.NoError(t, os.Unsetenv(env))
	}
}

// gceMetadata serves a metadata server of project "p" whose token requests token answers,
// and names it in GCE_METADATA_HOST.
func gceMetadata(t *testing.T, token http.HandlerFunc) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/token"):
			token(w, r)
		case strings.HasSuffix(r.URL.Path, "/project/project-id"):
			_, _ = io.WriteString(w, "p")
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	gceMetadataAt(t, srv)
}

// Application Default Credentials read the metadata server's project ID at load, through the
// metadata package's own client, which reads an answer whole (64 MiB took 500 MB); it is now
// read through a bounded client, and a server past the bound gives no credentials.
func TestGCSMetadataProjectIDIsReadUpToALimit(t *testing.T) {
	if !inGCEProcess(t) {
		return
	}
	var requests atomic.Int64
	huge := hugeTokenAnswer(http.StatusOK, &requests)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/project/project-id") {
			huge(w, r)
			return
		}
		w.WriteHeader(http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	gceMetadataAt(t, srv)
	var err error
	allocated := objstore.TotalAlloc(func() {
		b := open(t, "gs://b?universe_domain=project.invalid")
		_, err = b.Exists(context.Background(), "p/a")
	})
	t.Logf("%d requests, %d bytes allocated: %.300v", requests.Load(), allocated, err)
	require.Error(t, err)
	require.Less(t, allocated, uint64(1<<20), "bytes allocated")
	require.Equal(t, int64(1), requests.Load())
}

// The metadata server's token (GCE_METADATA_HOST) was asked through the metadata package's
// own client, which reads an answer whole, retrying a 5xx five times, and puts it into its
// error's text. It is now asked through a client that refuses an answer past 64 KiB.
func TestGCSMetadataTokenAnswerIsReadUpToALimit(t *testing.T) {
	if !inGCEProcess(t) {
		return
	}
	for _, status := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var tokens atomic.Int64
			gceMetadata(t, hugeTokenAnswer(status, &tokens))
			requireTokenAnswerRefusedOnce(t, fmt.Sprintf("gce%d.invalid", status), &tokens)
		})
	}
}

// tokenRefusalReason is a token endpoint's reason holding every phrase the GCS client retries
// an error on (storage.ShouldRetry matches an error's text).
const tokenRefusalReason = "read: connection reset by peer; broken pipe; server closed idle connection"

// requireTokenRefusedOnce runs each operation on bucket "b" in a universe of its own (the
// opener loads the credentials once per universe), whose token requests are refused, and
// checks that each fails after one token request, at once, saying the credentials were
// refused and why.
func requireTokenRefusedOnce(t *testing.T, universe, reason string, requests *atomic.Int64) {
	t.Helper()
	b := open(t, "gs://b?universe_domain="+universe).WithStallTimeout(2 * waitCap)
	for op, run := range bucketOps(b) {
		t.Run(op, func(t *testing.T) {
			requests.Store(0)
			start := time.Now()
			err := run()
			t.Logf("%d token requests in %v: %.300v", requests.Load(), time.Since(start), err)
			require.ErrorContains(t, err, "storage credentials were refused by their token endpoint (HTTP 400)")
			require.ErrorContains(t, err, "the token endpoint's reason: "+strconv.Quote(reason))
			require.Equal(t, int64(1), requests.Load(), "a refused token request is not asked again")
			require.Less(t, time.Since(start), waitCap, "a refused token request does not wait out the stall timeout")
		})
	}
}

// oauth2 puts a token endpoint's error answer in its error's text, and the GCS client retries
// an error whose text holds "connection reset" or the like, so a service account whose token
// request was refused (400 invalid_grant) with such a description was asked again until
// --storage-stall-timeout (3 requests in 3 s). A refusal is now an error whose text leaves
// the answer out, and the operation's error adds the reason back.
func TestGCSTokenRefusalIsNotRetriedWhateverItsReason(t *testing.T) {
	var requests atomic.Int64
	srv := refusingTokenEndpoint(t, "/token",
		fmt.Sprintf(`{"error":"invalid_grant","error_description":%q}`, tokenRefusalReason), &requests)
	serviceAccountAt(t, srv.URL+"/token")
	requireTokenRefusedOnce(t, "refused.invalid", "invalid_grant: "+tokenRefusalReason, &requests)
}

// The metadata server's refusal of a token (GCE_METADATA_HOST) was in the metadata package's
// error's text, which the GCS client matched as it does oauth2's; it is now a refusal too.
func TestGCSMetadataTokenRefusalIsNotRetriedWhateverItsReason(t *testing.T) {
	if !inGCEProcess(t) {
		return
	}
	var requests atomic.Int64
	gceMetadata(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, tokenRefusalReason)
	})
	requireTokenRefusedOnce(t, "gcerefused.invalid", tokenRefusalReason, &requests)
}

// refusingTokenEndpoint answers every request to path with 400 and body, counting them in
// refused, and any other request with a token (a service account's or an impersonation's).
func refusingTokenEndpoint(t *testing.T, path, body string, refused *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == path {
			refused.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, body)
			return
		}
		_, _ = io.WriteString(w, `{"access_token":"t","token_type":"Bearer","expires_in":3600,`+
			`"accessToken":"t","expireTime":"2099-01-01T00:00:00Z"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// oauth2 reports the refusal of an external account's token exchange (STS) and of an
// impersonation as text (`oauth2/google: status code 400: <body>`), not as a RetrieveError,
// so such a refusal whose description held "connection reset" or the like was asked again
// until --storage-stall-timeout (3 requests in 3 s). The token client's transport now tells
// the credentials' token source the answer it refused with.
func TestGCSTokenExchangeRefusalIsNotRetriedWhateverItsReason(t *testing.T) {
	oauthRefusal := fmt.Sprintf(`{"error":"invalid_grant","error_description":%q}`, tokenRefusalReason)
	googleRefusal := fmt.Sprintf(`{"error":{"code":400,"message":%q,"status":"INVALID_ARGUMENT"}}`,
		tokenRefusalReason)
	// externalAccount is an external account exchanging a subject token at url+"/sts", and
	// impersonating at url+"/impersonate" if impersonating.
	externalAccount := func(t *testing.T, url string, impersonating bool) map[string]any {
		subject := filepath.Join(t.TempDir(), "subject-token")
		require.NoError(t, os.WriteFile(subject, []byte("a-subject-token"), 0o600))
		creds := map[string]any{
			"type":               "external_account",
			"audience":           "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/q",
			"subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
			"token_url":          url + "/sts",
			"credential_source":  map[string]any{"file": subject},
		}
		if impersonating {
			creds["service_account_impersonation_url"] = url + "/impersonate"
		}
		return creds
	}
	impersonated := func(t *testing.T, url string) map[string]any {
		return map[string]any{
			"type":                              "impersonated_service_account",
			"service_account_impersonation_url": url + "/impersonate",
			"source_credentials":                serviceAccount(t, url+"/token"),
		}
	}
	for _, tc := range []struct {
		name, refusedPath, refusal string
		creds                      func(t *testing.T, url string) map[string]any
		universe, reason           string
	}{
		{"external account", "/sts", oauthRefusal,
			func(t *testing.T, url string) map[string]any { return externalAccount(t, url, false) },
			"sts.invalid", "invalid_grant: " + tokenRefusalReason},
		{"external account impersonating", "/impersonate", googleRefusal,
			func(t *testing.T, url string) map[string]any { return externalAccount(t, url, true) },
			"stsimp.invalid", tokenRefusalReason},
		{"impersonated service account", "/impersonate", googleRefusal, impersonated,
			"imp.invalid", tokenRefusalReason},
		// The impersonation's client fetches the source credentials' token, whose
		// RetrieveError oauth2 then makes text of (%v).
		{"impersonated service account whose own is refused", "/token", oauthRefusal, impersonated,
			"impsrc.invalid", "invalid_grant: " + tokenRefusalReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var requests atomic.Int64
			srv := refusingTokenEndpoint(t, tc.refusedPath, tc.refusal, &requests)
			credentialsAt(t, tc.creds(t, srv.URL))
			requireTokenRefusedOnce(t, tc.universe, tc.reason, &requests)
		})
	}
}
