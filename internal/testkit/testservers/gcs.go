package testservers

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/internal/testkit/apitest"
	"github.com/walkeeper/walkeeper/internal/testkit/testbin"
)

// startFakeGCS runs fake-gcs-server over plain HTTP with its in-memory backend. gocloud's
// gcsblob (through cloud.google.com/go/storage) talks to it when STORAGE_EMULATOR_HOST is
// set: unauthenticated, JSON API at http://HOST/storage/v1/, uploads at /upload/storage/v1/.
func startFakeGCS(s *Server) error {
	addr, err := s.run(1, nil, func(ports []int, _ string) []string {
		return []string{"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(ports[0]),
			"-public-host", proc.Addr(ports[0]), "-backend", "memory", "-log-level", "warn"}
	})
	if err != nil {
		return err
	}
	s.Env = []string{"STORAGE_EMULATOR_HOST=" + addr}
	if err := testbin.WaitHTTP(s.p, s.Endpoint+"/storage/v1/b", time.Minute); err != nil {
		return err
	}
	s.newBucket = func(ctx context.Context, name string) (string, error) {
		res, err := apitest.Do(ctx, apitest.JSON(http.MethodPost, s.Endpoint+"/storage/v1/b?project=walkeeper-test", map[string]string{"name": name}))
		if err != nil {
			return "", err
		}
		if res.Status != http.StatusOK {
			return "", fmt.Errorf("create bucket %s: %d: %.4096s", name, res.Status, res.Body)
		}
		return "gs://" + name, nil
	}
	return nil
}
