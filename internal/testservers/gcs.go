package testservers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/walkeeper/walkeeper/internal/proc"
)

// startFakeGCS runs fake-gcs-server over plain HTTP with its in-memory backend. gocloud's
// gcsblob (through cloud.google.com/go/storage) talks to it when STORAGE_EMULATOR_HOST is
// set: unauthenticated, JSON API at http://HOST/storage/v1/, uploads at /upload/storage/v1/.
func startFakeGCS(t testing.TB, s *Server) error {
	port, err := proc.FreePort()
	if err != nil {
		return err
	}
	addr := proc.Addr(port)
	s.p, err = proc.Start(proc.Spec{
		Path: s.bin,
		Args: []string{"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port),
			"-public-host", addr, "-backend", "memory", "-log-level", "warn"},
		Log: s.log,
	})
	if err != nil {
		return err
	}
	s.Endpoint = "http://" + addr
	s.Env = []string{"STORAGE_EMULATOR_HOST=" + addr}
	if err := s.p.WaitFor(time.Minute, func() error { return httpOK(s.Endpoint + "/storage/v1/b") }); err != nil {
		return err
	}
	s.newBucket = func(ctx context.Context, name string) (string, error) {
		body, _ := json.Marshal(map[string]string{"name": name})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint+"/storage/v1/b?project=walkeeper-test", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return "", fmt.Errorf("create bucket %s: %s: %s", name, resp.Status, msg)
		}
		return "gs://" + name, nil
	}
	return nil
}
