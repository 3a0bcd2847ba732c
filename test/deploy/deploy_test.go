// Package deploy_test keeps the deployment files honest against the code: every metric the
// store and worker register is documented in docs/OPERATIONS.md, every metric the alert rules,
// the Grafana dashboard and the docs name exists, and docker-compose.yml configures workers
// only through environment variables the worker really reads, with a storage URL that opens.
//
// Syntax is checked elsewhere: scripts/check-compose.sh runs `docker-compose config -q`,
// `promtool check rules`, the rule unit tests and parses every dashboard query.
package deploy_test

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/walkeeper/walkeeper/internal/testkit/testservers"
	"github.com/walkeeper/walkeeper/store"
	"github.com/walkeeper/walkeeper/worker"
)

const repoRoot = "../.."

func readFile(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// metric is one registered metric: its kind ("histogram" for histograms) and its variable
// labels.
type metric struct {
	kind   string
	labels []string
}

// registeredMetrics returns every metric the store and the worker register. The store's come
// from the descriptions of the collectors store.NewMetrics hands its registerer; the worker's
// from the *Opts literals in worker/metrics*.go, with the label list passed next to each,
// because the worker builds its registry itself. A metric added in either place is seen here
// without a list.
func registeredMetrics(t *testing.T) map[string]metric {
	t.Helper()
	out := map[string]metric{}
	rec := &recordingRegisterer{}
	store.NewMetrics(rec, nil)
	desc := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	for _, c := range rec.collectors {
		kind := "other"
		switch c.(type) {
		case prometheus.Histogram, *prometheus.HistogramVec:
			kind = "histogram"
		}
		descs := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			m := desc.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no fqName or variableLabels in %s", d)
			}
			out[m[1]] = metric{kind: kind}
			if m[2] != "" {
				out[m[1]] = metric{kind, strings.Split(m[2], ",")}
			}
		}
	}
	for _, f := range workerMetricFiles(t, repoRoot) {
		labelsOf := map[*ast.CompositeLit][]string{} // an *Opts literal -> the labels passed with it
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if opts, ok := optsLit(n.Args...); ok {
					labelsOf[opts] = callLabels(t, n, optsFields(opts)["Name"])
				}
				if name, kind, ok := optsCall(n.Args...); ok {
					out[name] = metric{kind, callLabels(t, n, name)}
				}
			case *ast.CompositeLit:
				if _, ok := optsLit(n); ok && optsFields(n)["Name"] != "" {
					fields := optsFields(n)
					name := prometheus.BuildFQName(fields["Namespace"], fields["Subsystem"], fields["Name"])
					kind := strings.TrimSuffix(n.Type.(*ast.SelectorExpr).Sel.Name, "Opts")
					out[name] = metric{strings.ToLower(kind), labelsOf[n]}
				}
			}
			return true
		})
	}
	if len(out) < 30 {
		t.Fatalf("found only %d metrics in the store's registry and worker/metrics*.go: %v", len(out), out)
	}
	for _, name := range []string{"walkeeper_flush_total", "walkeeper_http_requests_total"} {
		if len(out[name].labels) != 2 {
			t.Fatalf("labels of %s: %v; is the parsing still right?", name, out[name].labels)
		}
	}
	return out
}

// optsLit is the first of args when it is a prometheus *Opts literal.
func optsLit(args ...ast.Expr) (*ast.CompositeLit, bool) {
	if len(args) == 0 {
		return nil, false
	}
	lit, ok := args[0].(*ast.CompositeLit)
	if !ok {
		return nil, false
	}
	sel, ok := lit.Type.(*ast.SelectorExpr)
	return lit, ok && strings.HasSuffix(sel.Sel.Name, "Opts")
}

// optsCall is the metric name and kind of the first of args when it is a call of the worker's
// counterOpts, gaugeOpts or histogramOpts (worker/metrics.go), whose first two arguments are
// the subsystem and name as string literals.
func optsCall(args ...ast.Expr) (name, kind string, ok bool) {
	if len(args) == 0 {
		return "", "", false
	}
	call, ok := args[0].(*ast.CallExpr)
	if !ok || len(call.Args) < 2 {
		return "", "", false
	}
	fn, _ := call.Fun.(*ast.Ident)
	if fn == nil || !strings.HasSuffix(fn.Name, "Opts") {
		return "", "", false
	}
	var parts [2]string
	for i := range parts {
		lit, isLit := call.Args[i].(*ast.BasicLit)
		if !isLit || lit.Kind != token.STRING {
			return "", "", false
		}
		parts[i], _ = strconv.Unquote(lit.Value)
	}
	return prometheus.BuildFQName("walkeeper", parts[0], parts[1]), strings.TrimSuffix(fn.Name, "Opts"), true
}

// callLabels is the label list a constructor call passes after metric name's *Opts literal:
// none for a CounterFunc or GaugeFunc, whose last argument is the value function.
func callLabels(t *testing.T, call *ast.CallExpr, name string) []string {
	t.Helper()
	if _, valueFunc := call.Args[len(call.Args)-1].(*ast.FuncLit); len(call.Args) < 2 || valueFunc {
		return nil
	}
	list, ok := call.Args[1].(*ast.CompositeLit)
	if !ok {
		t.Fatalf("worker metrics: the labels of %s are no literal list", name)
	}
	var labels []string
	for _, e := range list.Elts {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			t.Fatalf("worker metrics: a label of %s is no string literal", name)
		}
		s, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		labels = append(labels, s)
	}
	return labels
}

// recordingRegisterer keeps what is registered on it.
type recordingRegisterer struct{ collectors []prometheus.Collector }

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *recordingRegisterer) Unregister(prometheus.Collector) bool { return false }

var metricRef = regexp.MustCompile(`\bwalkeeper_[a-z0-9_]+`)

// checkRefs fails for every walkeeper_* name in text that is no registered metric (allowing
// the _bucket/_sum/_count series of histograms). Returns the metrics referenced.
func checkRefs(t *testing.T, what, text string, metrics map[string]metric) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	for _, ref := range metricRef.FindAllString(text, -1) {
		name := ref
		if _, ok := metrics[name]; !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base := strings.TrimSuffix(ref, suffix); base != ref && metrics[base].kind == "histogram" {
					name = base
				}
			}
		}
		if _, ok := metrics[name]; !ok {
			t.Errorf("%s names %s, which no code registers", what, ref)
			continue
		}
		seen[name] = true
	}
	return seen
}

func TestOperationsDocListsEveryMetric(t *testing.T) {
	metrics := registeredMetrics(t)
	doc := readFile(t, "docs/OPERATIONS.md")
	for name := range metrics {
		if !strings.Contains(doc, "`"+name+"`") {
			t.Errorf("docs/OPERATIONS.md does not document metric `%s`", name)
		}
	}
	checkRefs(t, "docs/OPERATIONS.md", doc, metrics)
}

func TestAlertRulesUseRealMetricsAndCoverTheIssue(t *testing.T) {
	metrics := registeredMetrics(t)
	seen := checkRefs(t, "deploy/prometheus-rules.yml", readFile(t, "deploy/prometheus-rules.yml"), metrics)
	alerts := map[string]bool{}
	for _, g := range alertRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" {
				t.Errorf("rule %+v: needs alert, expr and a summary", r)
			}
			switch r.Labels["severity"] {
			case "info", "warning", "critical":
			default:
				t.Errorf("alert %s: severity %q", r.Alert, r.Labels["severity"])
			}
			if !strings.Contains(readFile(t, "docs/OPERATIONS.md"), r.Alert) {
				t.Errorf("alert %s is not explained in docs/OPERATIONS.md", r.Alert)
			}
			alerts[r.Alert] = true
		}
	}
	// The alerts an operator needs first: pending over the warn level, budget wait tail, merges failing, sweeps skipped.
	for _, a := range []string{"WalkeeperPendingOverWarnLevel", "WalkeeperBudgetWaitTail", "WalkeeperMergesFailing",
		"WalkeeperSweepsSkipped", "WalkeeperFlushSweepsSkipped", "WalkeeperReadsRefused"} {
		if !alerts[a] {
			t.Errorf("alert %s missing", a)
		}
	}
	for _, m := range []string{"walkeeper_read_pending_generations", "walkeeper_merge_budget_wait_seconds",
		"walkeeper_merge_total", "walkeeper_sweeper_skipped_total", "walkeeper_read_refused_total"} {
		if !seen[m] {
			t.Errorf("no alert uses %s", m)
		}
	}
}

// alertRules is deploy/prometheus-rules.yml.
func alertRules(t *testing.T) (rules struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}) {
	t.Helper()
	if err := yaml.Unmarshal([]byte(readFile(t, "deploy/prometheus-rules.yml")), &rules); err != nil {
		t.Fatal(err)
	}
	return rules
}

func TestGrafanaDashboard(t *testing.T) {
	metrics := registeredMetrics(t)
	text := readFile(t, "deploy/grafana-dashboard.json")
	var dash struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name string `json:"name"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			GridPos struct {
				H, W, X, Y int
			} `json:"gridPos"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(text), &dash); err != nil {
		t.Fatalf("not valid JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Fatal("dashboard needs uid and title")
	}
	vars := map[string]bool{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = true
	}
	var exprs []string
	ids := map[int]bool{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("duplicate panel id %d", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: bad gridPos %+v", p.Title, p.GridPos)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
			for _, v := range regexp.MustCompile(`\$([a-z_]+)`).FindAllStringSubmatch(tg.Expr, -1) {
				if v[1] != "__rate_interval" && !vars[v[1]] {
					t.Errorf("panel %q uses undefined variable $%s", p.Title, v[1])
				}
			}
		}
	}
	all := strings.Join(exprs, "\n")
	checkRefs(t, "deploy/grafana-dashboard.json", all, metrics)
	// What the issue asks the dashboard to show.
	for what, re := range map[string]string{
		"pending histogram quantiles": `histogram_quantile\(0\.99, sum by \(le\) \(rate\(walkeeper_read_pending_generations_bucket`,
		"merges by result":            `sum by \(result\) \(rate\(walkeeper_merge_total`,
		"commit lock p99":             `histogram_quantile\(0\.99, [^\n]*walkeeper_merge_commit_lock_seconds_bucket`,
		"budget reserved":             `walkeeper_merge_budget_reserved_bytes`,
		"budget wait":                 `histogram_quantile\(0\.99, [^\n]*walkeeper_merge_budget_wait_seconds_bucket`,
		"reads refused":               `rate\(walkeeper_read_refused_total`,
	} {
		if !regexp.MustCompile(re).MatchString(all) {
			t.Errorf("dashboard lacks %s (%s)", what, re)
		}
	}
}

func TestComposeWorkersUseRealConfig(t *testing.T) {
	services := composeServices(t)
	known := map[string]bool{}
	for _, k := range worker.Knobs() {
		known[k.Env] = true
	}
	for _, must := range []string{"WALKEEPER_STORAGE", "WALKEEPER_TEMPORAL", "WALKEEPER_NAMESPACE", "WALKEEPER_LISTEN", "WALKEEPER_INSTANCE"} {
		if !known[must] {
			t.Fatalf("worker.Knobs() has no %s: the config changed, update docker-compose.yml", must)
		}
	}
	for _, s := range []string{"postgresql", "temporal", "temporal-ui", "s3", "schedule"} {
		if _, ok := services[s]; !ok {
			t.Errorf("service %s missing", s)
		}
	}
	instances := map[string]string{}
	var storage string
	for name, svc := range services {
		for env := range svc.Environment {
			if strings.HasPrefix(env, "WALKEEPER_") && !known[env] {
				t.Errorf("service %s sets %s, which the worker does not read (worker.Knobs)", name, env)
			}
		}
		// One-shots run to completion and are waited for with service_completed_successfully:
		// no healthcheck, and a restart policy that gives up (on-failure), not "always".
		oneShot := name == "schedule" || name == "temporal-schema" || name == "temporal-namespace"
		if oneShot && !strings.HasPrefix(svc.Restart, "on-failure") {
			t.Errorf("one-shot service %s has restart %q, want on-failure", name, svc.Restart)
		}
		if len(svc.Profiles) == 0 && !oneShot {
			if svc.Restart == "" || svc.Restart == "no" {
				t.Errorf("service %s has no restart policy", name)
			}
			if svc.Healthcheck == nil {
				t.Errorf("service %s has no healthcheck", name)
			}
		}
		if len(svc.Command) > 0 && svc.Command[0] == "worker" {
			id := svc.Environment["WALKEEPER_INSTANCE"]
			if id == "" {
				t.Errorf("worker %s has no WALKEEPER_INSTANCE", name)
			} else if other, dup := instances[id]; dup {
				t.Errorf("workers %s and %s share instance id %s: they would fence each other", name, other, id)
			}
			instances[id] = name
			if id != name {
				t.Errorf("worker service %s has instance id %s; keep them equal so logs and shards match", name, id)
			}
			for _, must := range []string{"WALKEEPER_STORAGE", "WALKEEPER_TEMPORAL", "WALKEEPER_NAMESPACE", "WALKEEPER_LISTEN"} {
				if svc.Environment[must] == "" {
					t.Errorf("worker %s: %s not set", name, must)
				}
			}
			if l := svc.Environment["WALKEEPER_LISTEN"]; strings.HasPrefix(l, "127.") || strings.HasPrefix(l, "localhost") {
				t.Errorf("worker %s listens on %s: unreachable from other containers", name, l)
			}
			// temporal-namespace completes only once the server is up and serves the namespace.
			if svc.DependsOn["temporal-namespace"].Condition != "service_completed_successfully" || svc.DependsOn["s3"].Condition != "service_healthy" {
				t.Errorf("worker %s must wait for the namespace step and a healthy s3", name)
			}
			storage = svc.Environment["WALKEEPER_STORAGE"]
		}
	}
	// The set-up chain: schema before the server, the namespace once the server is healthy.
	if services["temporal"].DependsOn["temporal-schema"].Condition != "service_completed_successfully" {
		t.Errorf("temporal must wait for temporal-schema to complete")
	}
	if services["temporal-namespace"].DependsOn["temporal"].Condition != "service_healthy" {
		t.Errorf("temporal-namespace must wait for a healthy temporal")
	}
	if len(instances) < 3 {
		t.Errorf("%d workers, want at least 3", len(instances))
	}
	sched := services["schedule"]
	if strings.Join(sched.Command, " ") != "schedule ensure --every 1m" || sched.Restart != "on-failure" {
		t.Errorf("schedule service: command %q restart %q", sched.Command, sched.Restart)
	}
	for name, svc := range services {
		if df := svc.Build["dockerfile"]; df != "" {
			dockerfile := readFile(t, df)
			if !strings.Contains(dockerfile, " AS "+svc.Build["target"]+"\n") {
				t.Errorf("service %s builds target %q, which %s lacks", name, svc.Build["target"], df)
			}
		}
	}

	// The workers' storage URL opens and works against the server the s3 service runs
	// (versitygw, natively; only the host and bucket differ inside the compose network).
	if !strings.Contains(storage, "endpoint=http://s3:9000") {
		t.Fatalf("storage URL %q does not point at the s3 service", storage)
	}
	vgw, _ := testservers.Lookup(testservers.VersityGW)
	url := vgw.Start(t).URL
	endpoint := regexp.MustCompile(`endpoint=http://127\.0\.0\.1:[0-9]+`).FindString(url)
	bucket := strings.TrimPrefix(url[:strings.Index(url, "?")], "s3://")
	local := strings.Replace(strings.Replace(storage, "endpoint=http://s3:9000", endpoint, 1), "s3://walkeeper?", "s3://"+bucket+"?", 1)
	ctx := context.Background()
	opts := store.DefaultOptions()
	opts.InstanceID = "worker-0"
	db, err := store.OpenDB(ctx, local, opts)
	if err != nil {
		t.Fatalf("open %s: %v", local, err)
	}
	defer db.Close(ctx)
	if _, err := db.Create(ctx, store.Target{Kind: store.KindGeneric, Name: "compose"}, store.CreateOptions{
		Schema: &store.Schema{Fields: []store.Field{{Name: "id", Type: "string"}}}}); err != nil {
		t.Fatalf("create a store through the compose storage URL: %v", err)
	}
	list, err := db.ListTargets(ctx, store.Kinds, store.Target{}, 10)
	if err != nil || len(list.Stores) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
}

func TestDockerfileBuildsWhatComposeRuns(t *testing.T) {
	df := readFile(t, "deploy/Dockerfile")
	if !strings.Contains(df, "./cmd/walkeeper") {
		t.Errorf("deploy/Dockerfile does not build ./cmd/walkeeper")
	}
	if st, err := os.Stat(filepath.Join(repoRoot, "cmd", "walkeeper")); err != nil || !st.IsDir() {
		t.Errorf("./cmd/walkeeper: %v", err)
	}
	goMod := readFile(t, "go.mod")
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(goMod)
	if m == nil || !strings.Contains(df, "ARG GO_VERSION="+m[1]+"\n") {
		t.Errorf("deploy/Dockerfile GO_VERSION must match go.mod's go %v", m)
	}
	var stages []string
	for _, l := range strings.Split(df, "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "FROM" && f[2] == "AS" {
			stages = append(stages, f[3])
		}
	}
	sort.Strings(stages)
	if strings.Join(stages, ",") != "build,runtime,walkeeper" {
		t.Errorf("stages %v", stages)
	}
}
