package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
)

// This file holds the request-body checks every handler shares: media type and size cap;
// http_json_strict.go holds the strict decoding.

// decodeJSONBody is withBody with decodeStrict into v; an allowed empty body leaves v alone.
func (a *apiServer) decodeJSONBody(w http.ResponseWriter, r *http.Request, allowEmpty bool, v any) error {
	return a.withBody(w, r, allowEmpty, func(body []byte) error { return decodeStrict(body, v) })
}

// withBody enforces the media type, the size cap and the body budget, and hands the body to
// use, whose error it returns; the body's bytes go back to the budget once use returns (or
// panics). An empty body is not handed on when allowEmpty, and is invalid_json otherwise.
func (a *apiServer) withBody(w http.ResponseWriter, r *http.Request, allowEmpty bool, use func(body []byte) error) error {
	if r.ContentLength > a.cfg.MaxBodyBytes {
		return newAPIError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
			"request body is larger than %d bytes", a.cfg.MaxBodyBytes)
	}
	if allowEmpty && r.ContentLength == 0 {
		return nil // e.g. curl -X POST -d '' (which sends a form content type)
	}
	if ae := mediaTypeError(r.Header.Get("Content-Type")); ae != nil {
		// A chunked body has no length to tell that it is empty: read it to find out.
		if allowEmpty && r.ContentLength < 0 {
			if n, err := r.Body.Read(make([]byte, 1)); n == 0 && err == io.EOF {
				return nil
			}
		}
		return ae
	}
	// The bytes the body may hold: its Content-Length, at most --max-body-bytes (checked
	// above, so the reservation fits the budget), or that when the length is not known.
	n := r.ContentLength
	if n < 0 {
		n = a.cfg.MaxBodyBytes
	}
	release, err := a.bodies.take(r.Context(), n)
	if err != nil {
		return err
	}
	// Deferred, so that a panic gives the bytes back too: a reservation leaked per panic
	// would shrink the budget until every body waits.
	defer release()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	switch {
	case errors.As(err, new(*http.MaxBytesError)):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return newAPIError(http.StatusBadRequest, CodeInvalidJSON,
			"the body did not arrive within --http-read-timeout (%s)", a.cfg.HTTPReadTimeout)
	case err != nil:
		return newAPIError(http.StatusBadRequest, CodeInvalidJSON, "read body: %v", err)
	case len(bytes.TrimSpace(body)) == 0 && !allowEmpty:
		return newAPIError(http.StatusBadRequest, CodeInvalidJSON, "empty body; want JSON")
	case len(bytes.TrimSpace(body)) == 0:
		return nil
	}
	return use(body)
}

// mediaTypeError is the 415 for a Content-Type that is not application/json, or nil.
func mediaTypeError(ct string) *apiError {
	if ct == "" {
		return newAPIError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
			"Content-Type must be application/json")
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return newAPIError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
			"Content-Type %q is not application/json", clipText(ct))
	}
	return nil
}

// invalidJSON describes why body is not JSON.
func invalidJSON(body []byte) *apiError {
	var v any
	msg := "malformed JSON"
	if err := json.Unmarshal(body, &v); err != nil {
		msg = err.Error()
	}
	return newAPIError(http.StatusBadRequest, CodeInvalidJSON, "%s", msg)
}
