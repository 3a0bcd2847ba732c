package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
)

// This file holds the request-body checks every handler shares: media type, size cap,
// JSON syntax, duplicate member names and strict decoding.

// readJSONBody is readBody plus checkJSON (syntax and duplicate member names).
func (a *apiServer) readJSONBody(w http.ResponseWriter, r *http.Request, allowEmpty bool) ([]byte, error) {
	body, err := a.readBody(w, r, allowEmpty)
	if err != nil || body == nil {
		return nil, err
	}
	if err := checkJSON(body); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeJSONBody is readJSONBody plus decodeStrict into v; an allowed empty body leaves v as
// it is.
func (a *apiServer) decodeJSONBody(w http.ResponseWriter, r *http.Request, allowEmpty bool, v any) error {
	body, err := a.readJSONBody(w, r, allowEmpty)
	if err != nil || body == nil {
		return err
	}
	return decodeStrict(body, v)
}

// readBody enforces the media type and the size cap. An empty body is returned as nil when
// allowEmpty, and is invalid_json otherwise.
func (a *apiServer) readBody(w http.ResponseWriter, r *http.Request, allowEmpty bool) ([]byte, error) {
	if r.ContentLength > a.cfg.MaxBodyBytes {
		return nil, newAPIError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge,
			"request body is larger than %d bytes", a.cfg.MaxBodyBytes)
	}
	if allowEmpty && r.ContentLength == 0 {
		return nil, nil // e.g. curl -X POST -d '' (which sends a form content type)
	}
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil, newAPIError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
			"Content-Type must be application/json")
	}
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return nil, newAPIError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
			"Content-Type %q is not application/json", ct)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, err
		}
		return nil, newAPIError(http.StatusBadRequest, CodeInvalidJSON, "read body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if allowEmpty {
			return nil, nil
		}
		return nil, newAPIError(http.StatusBadRequest, CodeInvalidJSON, "empty body; want JSON")
	}
	return body, nil
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

// checkJSON rejects malformed JSON (invalid_json) and objects with a repeated member name
// (invalid_input): encoding/json would silently keep the last one.
func checkJSON(body []byte) error {
	if !json.Valid(body) {
		return invalidJSON(body)
	}
	if !bytes.Contains(body, []byte{'{'}) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		obj    bool
		keys   map[string]struct{}
		expKey bool // next token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return newAPIError(http.StatusBadRequest, CodeInvalidJSON, "%v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				continue
			}
			key, _ := tok.(string)
			if _, dup := top.keys[key]; dup {
				return newAPIError(http.StatusBadRequest, CodeInvalidInput,
					"duplicate field %q in a JSON object (at byte %d)", key, dec.InputOffset())
			}
			top.keys[key] = struct{}{}
			top.expKey = false
			continue
		}
		// A value (or the end of an array).
		if top != nil && top.obj {
			top.expKey = true
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{':
				stack = append(stack, &frame{obj: true, keys: map[string]struct{}{}, expKey: true})
			case '[':
				stack = append(stack, &frame{})
			case ']':
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].expKey = true
				}
			}
		}
	}
}

// decodeStrict unmarshals body into v, refusing unknown fields and trailing data.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "%v", err)
	}
	if dec.More() {
		return newAPIError(http.StatusBadRequest, CodeInvalidInput, "trailing data after the JSON value")
	}
	return nil
}
