// Command walkeeper-s3 serves the S3-compatible store of docker-compose.yml: the same
// gofakes3 server and atomic conditional-write wrapper (package s3test) that the store's S3
// tests race against, with objects kept in a bbolt file so they survive restarts.
//
// It is a development and CI server, not a production object store: one process, one file,
// no authentication (signatures are accepted unchecked), path-style addressing only.
//
//	walkeeper-s3 --listen :9000 --data /data/s3.db --buckets walkeeper
//
// Every flag is also read from the environment: S3_LISTEN, S3_DATA, S3_BUCKETS.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/johannesboyne/gofakes3"

	"github.com/walkeeper/walkeeper/internal/s3test"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("walkeeper-s3", flag.ContinueOnError)
	listen := fs.String("listen", envOr("S3_LISTEN", ":9000"), "listen address (env S3_LISTEN)")
	data := fs.String("data", envOr("S3_DATA", ""), "bbolt database file; empty keeps objects in memory (env S3_DATA)")
	buckets := fs.String("buckets", envOr("S3_BUCKETS", "walkeeper"), "comma-separated buckets created at start (env S3_BUCKETS)")
	verbose := fs.Bool("verbose", os.Getenv("S3_VERBOSE") != "", "log every request (env S3_VERBOSE)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "walkeeper-s3: unexpected arguments %q\n", fs.Args())
		return 2
	}
	opts := s3test.Options{Addr: *listen, BoltPath: *data}
	for _, b := range strings.Split(*buckets, ",") {
		if b = strings.TrimSpace(b); b != "" {
			opts.Buckets = append(opts.Buckets, b)
		}
	}
	if *verbose {
		opts.Logger = stdLogger{}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	addr, wait, err := s3test.Serve(ctx, opts)
	if err != nil {
		log.Printf("walkeeper-s3: %v", err)
		return 1
	}
	store := "memory"
	if *data != "" {
		store = *data
	}
	log.Printf("walkeeper-s3: serving S3 on %s (objects in %s, buckets %q)", addr, store, opts.Buckets)
	if err := wait(); err != nil {
		log.Printf("walkeeper-s3: %v", err)
		return 1
	}
	return 0
}

func envOr(k, def string) string {
	if v, ok := os.LookupEnv(k); ok {
		return v
	}
	return def
}

type stdLogger struct{}

func (stdLogger) Print(level gofakes3.LogLevel, v ...any) { log.Println(append([]any{level}, v...)...) }
