package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"

	"github.com/spf13/cobra"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/proc"
	"github.com/walkeeper/walkeeper/temporaladmin"
	"github.com/walkeeper/walkeeper/worker"
)

// A running `walkeeper dev` describes itself in <data>/dev.json, so the client commands find
// its Temporal, storage and Web UI without flags; the file is trusted only while dev's lock
// on the directory is held (devlock.go).

const (
	devStateFile = "dev.json"
	// devStateMaxBytes bounds what is read of dev.json: dev writes a few hundred bytes.
	devStateMaxBytes = 64 << 10
	// devDataEnv names the data directory of the dev to read, for a dev started with --data.
	devDataEnv = "WALKEEPER_DEV_DATA"
	// uiEnv is the Temporal Web UI base URL for the links commands print.
	uiEnv = "WALKEEPER_TEMPORAL_UI"
	// defaultUIURL is where `temporal server start-dev` serves the Web UI by default.
	defaultUIURL = "http://127.0.0.1:8233"
)

// devState is the content of dev.json: the lock's holder, then what the dev serves.
type devState struct {
	lockHolder
	Storage     string   `json:"storage"`
	Temporal    string   `json:"temporal"`
	Namespace   string   `json:"namespace"`
	UI          string   `json:"ui,omitempty"`
	HTTP        []string `json:"http,omitempty"`
	TemporalCLI string   `json:"temporal_cli,omitempty"`
	Log         string   `json:"log,omitempty"`
}

// writeDevState replaces dir/dev.json atomically through a temp file created new (O_EXCL,
// 0600), so nothing left at its name receives the state.
func writeDevState(dir string, st devState) error {
	tmp, err := os.CreateTemp(dir, ".dev.json-*")
	if err != nil {
		return fmt.Errorf("dev state: %w", printable(err))
	}
	defer os.Remove(tmp.Name())
	if err = errors.Join(writeJSON(tmp, st), tmp.Close()); err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, devStateFile))
	}
	if err != nil {
		return fmt.Errorf("dev state: %w", printable(err))
	}
	return nil
}

// readDevState reads dir/dev.json if a live dev holds dir.
func readDevState(dir string) (devState, bool) {
	var st devState
	if !dataDirInUse(dir) {
		return st, false
	}
	f, err := proc.OpenRegular(filepath.Join(dir, devStateFile), os.O_RDONLY, 0)
	if err != nil {
		return devState{}, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, devStateMaxBytes+1))
	if err != nil || len(b) > devStateMaxBytes || json.Unmarshal(b, &st) != nil || !st.plausible() {
		return devState{}, false
	}
	return st, true
}

// plausible reports whether st could have been written by dev: printable text, a Temporal
// address that parses, a file:// storage and http(s) URLs. Anyone who can write the file could
// otherwise make client commands print escape sequences, blame a bad value on --temporal or
// --storage, or open another storage with the caller's credentials.
func (st devState) plausible() bool {
	texts := append([]string{st.Storage, st.Temporal, st.Namespace, st.UI}, st.HTTP...)
	if slices.ContainsFunc(texts, func(s string) bool { return contract.Printable(s) != s }) {
		return false
	}
	tc := worker.TemporalConfig{Config: temporaladmin.Config{HostPort: st.Temporal}}
	if tc.Validate() != nil || (st.Storage != "" && !hasScheme(st.Storage, "file")) {
		return false
	}
	notWeb := func(u string) bool { return !hasScheme(u, "http", "https") }
	return !slices.ContainsFunc(st.HTTP, notWeb) && (st.UI == "" || !notWeb(st.UI))
}

// hasScheme reports whether raw parses as a URL of one of schemes.
func hasScheme(raw string, schemes ...string) bool {
	u, err := url.Parse(raw)
	return err == nil && slices.Contains(schemes, u.Scheme)
}

// runningDev is the state of the dev running in $WALKEEPER_DEV_DATA, else in dev's --data
// default; ok is false when none runs there.
func runningDev() (st devState, ok bool) {
	return readDevState(cmp.Or(os.Getenv(devDataEnv), filepath.Join(".cache", "dev")))
}

// devDefaults fills in, from a running dev, the Temporal address and namespace that neither
// the command line nor the environment set, and returns the dev's state (zero: none runs).
func (g *globalOptions) devDefaults(cmd *cobra.Command) devState {
	st, ok := runningDev()
	if !ok {
		return st
	}
	if !cmd.Flags().Changed("temporal") && os.Getenv("WALKEEPER_TEMPORAL") == "" {
		g.temporal.HostPort = st.Temporal
		if !cmd.Flags().Changed("namespace") && os.Getenv("WALKEEPER_NAMESPACE") == "" && st.Namespace != "" {
			g.temporal.Namespace = st.Namespace
		}
	}
	return st
}

// uiBaseOrDev is the --ui value (flag or $WALKEEPER_TEMPORAL_UI), else the running dev's
// Web UI, else the dev server's default address.
func uiBaseOrDev(flag string, st devState) string { return cmp.Or(flag, st.UI, defaultUIURL) }

// registerUIFlag adds --ui to a command that prints Web UI links.
func registerUIFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "ui", os.Getenv(uiEnv),
		"Temporal Web UI base URL for links (env "+uiEnv+"; default: the running dev's, else "+defaultUIURL+")")
}
