package worker

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/walkeeper/walkeeper/temporaladmin"
)

// This file binds the knob table (config_knobs.go) to flags and environment variables, with
// flag > environment > default: environment values are applied when the flags are registered
// (so --help shows them), and one that does not parse is an error Validate reports unless a
// flag overrides it.

// envErrors holds environment values that did not parse, by flag name.
type envErrors map[string]error

// register sets k from its environment variable, if set, recording a value that does not
// parse, and adds k's flag to fs, which clears that record when given.
func (e *envErrors) register(fs *pflag.FlagSet, k knob, get func() string, set func(string) error) {
	if v, ok := os.LookupEnv(k.env()); ok {
		if err := set(v); err != nil {
			if *e == nil {
				*e = envErrors{}
			}
			(*e)[k.Flag] = fmt.Errorf("%s=%q: %w", k.env(), v, err)
		}
	}
	f := fs.VarPF(&knobValue{get: get, set: set, ok: func() { delete(*e, k.Flag) }, typ: k.typ}, k.Flag, "", k.usage())
	if k.typ == "bool" {
		f.NoOptDefVal = "true"
	}
	if k.Secret {
		f.DefValue = "" // never print a secret from the environment in --help
	}
}

// sorted lists the errors in flag order.
func (e envErrors) sorted() []error {
	errs := make([]error, 0, len(e))
	for _, n := range slices.Sorted(maps.Keys(e)) {
		errs = append(errs, e[n])
	}
	return errs
}

// RegisterFlags adds one flag per knob to fs, but the Temporal connection's, which
// c.Temporal.RegisterFlags adds so that every command spells them alike.
func (c *Config) RegisterFlags(fs *pflag.FlagSet) {
	for _, k := range knobs {
		if k.temporal == nil {
			c.envErrs.register(fs, k, func() string { return k.get(c) }, func(s string) error { return k.set(c, s) })
		}
	}
	c.Temporal.RegisterFlags(fs)
}

// RegisterKnobFlags adds, for a command other than `walkeeper worker`, the flags of the named
// worker knobs to fs, bound to c with the worker's environment variables, so that the command
// reads storage with the settings of the workers it stands beside. A name that is no worker
// knob is a programming error every command's --help test runs into, so it panics.
func (c *Config) RegisterKnobFlags(fs *pflag.FlagSet, flags ...string) {
	for _, flag := range flags {
		k, ok := lookupKnob(flag)
		if !ok || k.temporal != nil {
			panic(fmt.Sprintf("worker.RegisterKnobFlags: %q is not a knob of the worker", flag))
		}
		c.envErrs.register(fs, k, func() string { return k.get(c) }, func(s string) error { return k.set(c, s) })
	}
}

// RegisterFlags adds --temporal, --namespace and the --temporal-tls*/--temporal-api-key
// flags to fs from the knob table, with WALKEEPER_TEMPORAL, WALKEEPER_NAMESPACE, … applied
// over the current values of c. Validate reports environment values that did not parse.
func (c *TemporalConfig) RegisterFlags(fs *pflag.FlagSet) {
	for _, k := range knobs {
		if t := k.temporal; t != nil {
			c.envErrs.register(fs, k, func() string { return t.get(c) }, func(s string) error { return t.set(c, s) })
		}
	}
}

// Validate reports environment values that did not parse (unless a flag overrode them), an
// address that cannot be dialled, and a client certificate without its key or the other way
// round.
func (c *TemporalConfig) Validate() error {
	errs := c.envErrs.sorted()
	switch {
	case c.HostPort == "":
		errs = append(errs, errors.New("--temporal: must not be empty"))
	case !strings.Contains(c.HostPort, "://"): // a gRPC resolver target is the SDK's to check
		if err := checkHostPort(c.HostPort, 1); err != nil {
			errs = append(errs, fmt.Errorf("--temporal: %w", err))
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("--temporal-tls-cert: --temporal-tls-cert and --temporal-tls-key go together"))
	}
	return errors.Join(errs...)
}

// StringKnobVar registers, for a command other than `walkeeper worker`, a flag that shares a
// string knob of the worker (same flag name, same environment variable, so one name means one
// thing everywhere), defaulting to def and helped by usage. A name that is no string knob is
// a programming error every command's --help test runs into, so it panics.
func StringKnobVar(fs *pflag.FlagSet, p *string, flag, def, usage string) {
	k, ok := lookupKnob(flag)
	if !ok || k.typ != "string" || k.temporal != nil {
		panic(fmt.Sprintf("worker.StringKnobVar: %q is not a string knob of the worker", flag))
	}
	*p, k.Usage = def, usage
	// A string always parses, so no environment error is ever recorded.
	new(envErrors).register(fs, k, func() string { return *p }, func(s string) error { *p = s; return nil })
}

// knobValue adapts one knob of one config to pflag.Value. Setting it from the command line
// clears the knob's pending environment error (ok).
type knobValue struct {
	get func() string
	set func(string) error
	ok  func()
	typ string
}

func (v *knobValue) String() string {
	if v.get == nil { // pflag calls String on a zero value to detect zero defaults
		return ""
	}
	return v.get()
}

func (v *knobValue) Set(s string) error {
	if err := v.set(s); err != nil {
		return err
	}
	v.ok()
	return nil
}

func (v *knobValue) Type() string { return v.typ }

// TemporalConfig is the Temporal connection as the worker's knobs set it: --temporal,
// --namespace and the --temporal-tls*/--temporal-api-key flags with their environment
// variables (config_knobs.go, config_flags.go).
type TemporalConfig struct {
	temporaladmin.Config

	envErrs envErrors // reported by Validate
}

// DefaultTemporalConfig is the local dev server's address and namespace, without TLS.
func DefaultTemporalConfig() TemporalConfig {
	var c TemporalConfig
	for _, k := range knobs {
		if k.temporal != nil {
			k.temporal.reset(&c)
		}
	}
	c.MetricsHandler = SDKMetrics
	return c
}

// checkHostPort refuses an address that is not host:port with a port number or a service
// name this machine knows, and a port below lowest (1 where a server is dialled), so that a
// mistyped port stops the command at once instead of a dial or a bind that never works.
func checkHostPort(addr string, lowest int) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port: %v", addr, err)
	}
	if n, err := net.LookupPort("tcp", port); err != nil || n < lowest {
		return fmt.Errorf("%q: port %q is not a number %d to 65535 or a service name", addr, port, lowest)
	}
	return nil
}
