package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/internal/cli"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
)

// loadGen appends rows {"id","n","msg"} to one store through one or more workers (round
// robin) at a fixed rate and seals regularly, so merges have something to do; ids repeat
// after keySpace rows, so merges really deduplicate.
type loadGen struct {
	urls       []string // worker base URLs, e.g. http://127.0.0.1:8081
	target     store.Target
	token      string
	rate       int // rows per second
	batch      int // rows per request
	keySpace   int
	flushEvery time.Duration
	duration   time.Duration
	out        io.Writer

	appended atomic.Int64
	refused  atomic.Int64
	flushes  atomic.Int64
}

// demoSchema is the schema of the store the load generator creates.
var demoSchema = map[string]any{"fields": []map[string]any{
	{"name": "id", "type": "string"},
	{"name": "n", "type": "int64", "nullable": true},
	{"name": "msg", "type": "string", "nullable": true},
}}

// maxLoadBatch bounds --batch: the worker's default --max-append-rows.
const maxLoadBatch = 10_000

// loadClient bounds each request of the load generator.
var loadClient = &http.Client{Timeout: 30 * time.Second}

func (l *loadGen) storeURL(base string) string {
	return strings.TrimRight(base, "/") + "/api/v1/stores/" + string(l.target.Kind) + "/" + l.target.Name
}

func (l *loadGen) post(ctx context.Context, url string, body any) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if l.token != "" {
		req.Header.Set("Authorization", "Bearer "+l.token)
	}
	resp, err := loadClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, data, nil
}

// create makes the store (generic: with demoSchema); an existing store is fine.
func (l *loadGen) create(ctx context.Context) error {
	var body any
	if l.target.Kind == store.KindGeneric {
		body = demoSchema
	}
	code, _, data, err := l.post(ctx, l.storeURL(l.urls[0]), body)
	if err != nil {
		return fmt.Errorf("create %s: %w", l.target, err)
	}
	switch code {
	case http.StatusCreated:
		fmt.Fprintf(l.out, "load: created store %s\n", l.target)
	case http.StatusConflict:
	default:
		return fmt.Errorf("create %s: HTTP %d: %s", l.target, code, bytes.TrimSpace(data))
	}
	return nil
}

// run appends until the duration is over or ctx is cancelled. Transient failures (503 with
// Retry-After, connection errors) are waited out; a 4xx answer stops the load.
func (l *loadGen) run(ctx context.Context) error {
	if l.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.duration)
		defer cancel()
	}
	tick := time.NewTicker(l.interval())
	defer tick.Stop()
	var flushC <-chan time.Time
	if l.flushEvery > 0 {
		ft := time.NewTicker(l.flushEvery)
		defer ft.Stop()
		flushC = ft.C
	}
	seq := 0
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			l.flushAll(context.Background())
			return nil
		case <-flushC:
			l.flushAll(ctx)
			continue
		case <-tick.C:
		}
		rows := make([]map[string]any, l.batch)
		for j := range rows {
			rows[j] = map[string]any{
				"id":  fmt.Sprintf("row-%06d", seq%l.keySpace),
				"n":   seq,
				"msg": fmt.Sprintf("demo row %d", seq),
			}
			seq++
		}
		base := l.urls[i%len(l.urls)]
		code, hdr, data, err := l.post(ctx, l.storeURL(base)+"/rows", rows)
		var wait time.Duration
		switch {
		case err != nil && ctx.Err() != nil:
		case err != nil:
			fmt.Fprintf(l.out, "load: append via %s: %v\n", base, err)
			// A worker that is down or restarting: waited out, not asked again at the full rate.
			wait = time.Second
		case code == http.StatusOK:
			l.appended.Add(int64(len(rows)))
		case code == http.StatusServiceUnavailable || code == http.StatusTooManyRequests:
			l.refused.Add(1)
			wait = time.Second
			if s, err := strconv.Atoi(hdr.Get("Retry-After")); err == nil && s > 0 {
				wait = time.Duration(s) * time.Second
			}
		case code == http.StatusNotFound && answerCode(data) == worker.CodeStoreNotFound:
			return &storeMissingError{target: l.target, worker: base} // bad input (exit 2), as for merge
		case code >= 400 && code < 500:
			return fmt.Errorf("append to %s via %s: HTTP %d: %s", l.target, base, code, bytes.TrimSpace(data))
		default:
			fmt.Fprintf(l.out, "load: append via %s: HTTP %d: %s\n", base, code, bytes.TrimSpace(data))
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}

// answerCode is the stable code of a worker's error answer, "" when it names none.
func answerCode(data []byte) string {
	var answer struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(data, &answer) // not JSON: no code
	return answer.Code
}

// interval is the time between two appends: batch rows at rate rows per second.
func (l *loadGen) interval() time.Duration {
	return time.Duration(float64(time.Second) * float64(l.batch) / float64(l.rate))
}

func (l *loadGen) flushAll(ctx context.Context) {
	for _, base := range l.urls {
		code, _, data, err := l.post(ctx, l.storeURL(base)+"/flush", nil)
		if err == nil && code == http.StatusOK {
			l.flushes.Add(1)
			continue
		}
		if ctx.Err() == nil && err != nil {
			fmt.Fprintf(l.out, "load: flush via %s: %v\n", base, err)
		} else if err == nil {
			fmt.Fprintf(l.out, "load: flush via %s: HTTP %d: %s\n", base, code, bytes.TrimSpace(data))
		}
	}
}

func newLoadCmd() *cobra.Command {
	l := &loadGen{}
	var (
		target string
		create bool
	)
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Append rows to a store through workers' HTTP API at a steady rate",
		Long: `Append rows {"id","n","msg"} to a store through the HTTP data plane of one or more workers
(round robin) at --rate rows per second for --duration, sealing every --flush-every so that
flushed generations accumulate and merges have work. Ids repeat after --keys rows, so merges
really deduplicate. With --create a generic store is created first (an existing one is fine).
A worker that answers 503 (too many pending generations) is waited out per Retry-After.`,
		Example: `  walkeeper load --http http://127.0.0.1:8081 --target generic:demo --create --duration 1m`,
		Args:    cli.Args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, a []string) error {
			t, err := parseTarget(target)
			if err != nil {
				return err
			}
			// A URL a request cannot be sent to failed every append as a connection error,
			// which the load waits out until --duration ends.
			bad := slices.IndexFunc(l.urls, func(u string) bool {
				p, err := url.Parse(u)
				return err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == ""
			})
			switch {
			case len(l.urls) == 0:
				return cli.Usagef("--http needs at least one worker URL")
			case bad >= 0:
				return cli.Usagef("--http %q is not an http:// or https:// URL with a host", contract.Clip(l.urls[bad], 256))
			case l.rate <= 0 || l.batch <= 0:
				return cli.Usagef("--rate and --batch must be positive")
			case l.batch > maxLoadBatch:
				// Each request's rows are built in memory first; a worker takes at most
				// --max-append-rows of them (10,000 by default) anyway.
				return cli.Usagef("--batch %d is above %d rows per request", l.batch, maxLoadBatch)
			case l.interval() <= 0:
				// One request every batch/rate seconds: a ticker cannot tick more than once a
				// nanosecond, and a negative duration would silently mean "run for ever".
				return cli.Usagef("--rate %d with --batch %d asks for more than one request a nanosecond", l.rate, l.batch)
			case l.duration < 0 || l.flushEvery < 0 || l.keySpace < 0:
				return cli.Usagef("--duration, --flush-every and --keys must not be negative")
			case create && t.Kind != store.KindGeneric:
				return cli.Usagef("--create only makes generic stores; %s must exist", t)
			}
			l.target, l.out, l.keySpace = t, cmd.ErrOrStderr(), cmp.Or(l.keySpace, 5000)
			ctx, cancel := cli.SignalContext(cmd.Context())
			defer cancel()
			if create {
				if err := l.create(ctx); err != nil {
					return err
				}
			}
			start := time.Now()
			err = l.run(ctx)
			fmt.Fprintf(cmd.OutOrStdout(), "appended %d rows to %s in %s (%d seals, %d refused requests)\n",
				l.appended.Load(), t, time.Since(start).Round(time.Millisecond), l.flushes.Load(), l.refused.Load())
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&l.urls, "http", []string{"http://127.0.0.1:8081"}, "worker base URL(s), comma-separated")
	f.StringVar(&target, "target", "generic:demo", "store to append to, <kind>:<name>")
	f.BoolVar(&create, "create", false, "create the (generic) store first")
	worker.StringKnobVar(f, &l.token, "auth-token", "", "bearer token for the workers")
	f.IntVar(&l.rate, "rate", 100, "rows per second")
	f.IntVar(&l.batch, "batch", 25, "rows per request (at most 10000)")
	f.IntVar(&l.keySpace, "keys", 5000, "distinct ids; later rows overwrite earlier ones")
	f.DurationVar(&l.flushEvery, "flush-every", 2*time.Second, "seal the store on every worker this often (0 = leave it to the workers)")
	f.DurationVar(&l.duration, "duration", 30*time.Second, "how long to run (0 = until Ctrl-C)")
	return cmd
}
