package worker

import "github.com/walkeeper/walkeeper/temporaladmin"

// TemporalConfig is the Temporal connection as the worker's knobs set it: --temporal,
// --namespace and the --temporal-tls*/--temporal-api-key flags with their environment
// variables (config_knobs.go, config_flags.go).
type TemporalConfig struct {
	temporaladmin.Config

	// envErrs holds environment values that did not parse (RegisterFlags); Validate
	// reports them.
	envErrs envErrors
}

// DefaultTemporalConfig is the local dev server's address and namespace, without TLS.
func DefaultTemporalConfig() TemporalConfig {
	c := TemporalConfig{Config: temporaladmin.DefaultConfig()}
	c.MetricsHandler = SDKMetrics
	return c
}
