// Package temporaladmin talks to Temporal's control plane for walkeeper: dialling, search
// attributes, schedules and the worker's start probes (fairness, partitions); it runs no
// workflow code.
package temporaladmin

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Connection defaults: the local dev server.
const (
	DefaultHostPort  = "127.0.0.1:7233"
	DefaultNamespace = "default"
)

// Config says how to reach Temporal. TLS is switched on by TLS, by any of the TLS files, by a
// server name override, or by an API key (Temporal Cloud).
type Config struct {
	HostPort      string `json:"host_port"`
	Namespace     string `json:"namespace"`
	TLS           bool   `json:"tls"`
	TLSCert       string `json:"tls_cert,omitempty"`        // client certificate (PEM file), mTLS
	TLSKey        string `json:"tls_key,omitempty"`         // client key (PEM file), mTLS
	TLSCA         string `json:"tls_ca,omitempty"`          // CA bundle (PEM file) to verify the server
	TLSServerName string `json:"tls_server_name,omitempty"` // SNI / verification name override
	APIKey        string `json:"-"`                         // never logged or serialised
	// MetricsHandler gets the metrics of the client and of the workflows run on it (nil:
	// none are kept).
	MetricsHandler client.MetricsHandler `json:"-"`
}

// ClientOptions turns the config into SDK client options. logger may be nil.
func (c Config) ClientOptions(logger *zap.Logger) (client.Options, error) {
	opts := client.Options{
		HostPort:       cmp.Or(c.HostPort, DefaultHostPort),
		Namespace:      cmp.Or(c.Namespace, DefaultNamespace),
		Logger:         newSDKLogger(logger),
		MetricsHandler: c.MetricsHandler,
	}
	opts.ConnectionOptions.DialOptions = append(opts.ConnectionOptions.DialOptions, grpc.WithChainUnaryInterceptor(reportStartOutcome))
	var err error
	if opts.ConnectionOptions.TLS, err = c.tlsConfig(); err != nil {
		return client.Options{}, err
	}
	if c.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(c.APIKey)
	}
	return opts, nil
}

func (c Config) tlsConfig() (*tls.Config, error) {
	if !c.TLS && c.TLSCert == "" && c.TLSKey == "" && c.TLSCA == "" && c.TLSServerName == "" && c.APIKey == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.TLSServerName}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return nil, errors.New("temporal TLS: --temporal-tls-cert and --temporal-tls-key must be given together")
	}
	if c.TLSCert != "" {
		cert, err := readPEMFile(c.TLSCert)
		if err != nil {
			return nil, fmt.Errorf("temporal TLS: load client certificate: %w", err)
		}
		key, err := readPEMFile(c.TLSKey)
		if err != nil {
			return nil, fmt.Errorf("temporal TLS: load client certificate: %w", err)
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("temporal TLS: load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if c.TLSCA != "" {
		pem, err := readPEMFile(c.TLSCA)
		if err != nil {
			return nil, fmt.Errorf("temporal TLS: read CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal TLS: no PEM certificates in %s", c.TLSCA)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// Dial connects to Temporal, SDK logs to logger (may be nil), and checks the frontend answers.
func Dial(ctx context.Context, cfg Config, logger *zap.Logger) (client.Client, error) {
	opts, err := cfg.ClientOptions(logger)
	if err != nil {
		return nil, err
	}
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("dial temporal %s (namespace %s): %w", opts.HostPort, opts.Namespace, err)
	}
	return c, nil
}

// MaxPEMFileBytes bounds a TLS file; a certificate chain or a CA bundle is a few hundred KiB.
const MaxPEMFileBytes = 1 << 20

// readPEMFile reads the TLS file path, a regular file of at most MaxPEMFileBytes (a FIFO or a
// device could block or never end).
func readPEMFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxPEMFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > MaxPEMFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxPEMFileBytes)
	}
	return b, nil
}
