// Package apitest is the HTTP client tests share: one request in, the whole answer out, JSON
// either way. The worker package's own tests, the end-to-end and deployment tests, and the
// reliability and integration suites call walkeeper's data plane through it, and
// internal/testkit/testservers creates fake-gcs-server's buckets with it.
package apitest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// Request is one call.
type Request struct {
	Method string
	URL    string
	// Body is nil, a string or a []byte (sent as it is; empty = no body), or any other value,
	// sent as its JSON encoding.
	Body any
	// ContentType is sent as given; "" = no Content-Type (JSON builds the usual request).
	ContentType string
	// Token is sent as a bearer token when set.
	Token string
}

// Response is the whole answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Do sends r and reads the whole answer. The error is for a request that got no answer; an
// answer with any status is a Response.
func Do(ctx context.Context, r Request) (Response, error) {
	body, err := encode(r.Body)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", r.Method, r.URL, err)
	}
	// An empty bytes.Reader is no body at all (http.NoBody) to net/http.
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, bytes.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	if r.Token != "" {
		req.Header.Set("Authorization", "Bearer "+r.Token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", r.Method, r.URL, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: reading the answer: %w", r.Method, r.URL, err)
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: raw}, nil
}

// JSON is a request that sends body (see Request.Body) as application/json, if there is one.
func JSON(method, url string, body any) Request {
	r := Request{Method: method, URL: url, Body: body}
	if raw, _ := encode(body); len(raw) > 0 {
		r.ContentType = "application/json"
	}
	return r
}

// encode returns the bytes of a request body; empty = no body.
func encode(body any) ([]byte, error) {
	switch b := body.(type) {
	case nil:
		return nil, nil
	case string:
		return []byte(b), nil
	case []byte:
		return b, nil
	default:
		return json.Marshal(b)
	}
}

// Decode decodes a JSON answer into out. An empty body or a nil out decodes nothing; a body
// that is not JSON of out's shape is an error that quotes it.
func (r Response) Decode(out any) error {
	if out == nil || len(r.Body) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.Body, out); err != nil {
		return fmt.Errorf("answer %d %q: %w", r.Status, strings.TrimSpace(string(r.Body)), err)
	}
	return nil
}

// Client calls one test's API and fails the test when a request gets no answer.
type Client struct {
	T testing.TB
	// Base is prefixed to every path ("http://host:port"); "" = paths are whole URLs.
	Base string
	// Token is sent as a bearer token when set.
	Token string
	// Ctx bounds every request; nil = context.Background().
	Ctx context.Context
}

// Do sends body (see Request.Body) to Base+path as application/json.
func (c Client) Do(method, path string, body any) Response {
	c.T.Helper()
	return c.DoType(method, path, JSON(method, "", body).ContentType, body)
}

// DoType is Do with the Content-Type given ("" = none), for tests of what the API refuses.
func (c Client) DoType(method, path, contentType string, body any) Response {
	c.T.Helper()
	res, err := Do(cmp.Or(c.Ctx, context.Background()), Request{Method: method, URL: c.Base + path, Body: body, ContentType: contentType, Token: c.Token})
	if err != nil {
		c.T.Fatal(err)
	}
	return res
}
