package reliability

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walkeeper/walkeeper/store/objstore"
)

// ErrInjected is the error every injected fault returns (wrapped with the op and key).
// It wraps none of the store's sentinels, so the store treats it like a network or disk
// failure whose outcome it does not know.
var ErrInjected = errors.New("reliability: injected storage fault")

// InjectorConfig sets the fault mix of an Injector. Rates are probabilities per call.
type InjectorConfig struct {
	// ErrorRate fails a call before it reaches storage (nothing is written).
	ErrorRate float64
	// GhostRate makes a successful Put or PutIfAbsent report failure: the write landed but
	// the caller is told it did not (the ambiguous outcome of a timeout after the request).
	GhostRate float64
	// SpikeRate delays a call by a random duration up to SpikeMax before it runs.
	SpikeRate float64
	SpikeMax  time.Duration
}

// OpStats counts what an Injector did to one operation.
type OpStats struct {
	Calls  int64 `json:"calls"`
	Active int64 `json:"active"` // calls while faults were on, the ones that could fail
	Errors int64 `json:"errors"` // failed before reaching storage
	Ghosts int64 `json:"ghosts"` // landed, reported failed
	Spikes int64 `json:"spikes"` // delayed
}

func (s OpStats) add(o OpStats) OpStats {
	return OpStats{s.Calls + o.Calls, s.Active + o.Active, s.Errors + o.Errors, s.Ghosts + o.Ghosts, s.Spikes + o.Spikes}
}

// Injector is a objstore.Faults that fails, delays and "ghosts" bucket calls at random.
// It starts enabled; Enable(false) turns it into a pass-through (the calls are still counted).
type Injector struct {
	cfg     InjectorConfig
	enabled atomic.Bool

	mu    sync.Mutex
	rng   *rand.Rand
	stats map[string]*OpStats
}

// NewInjector returns an enabled injector.
func NewInjector(cfg InjectorConfig) *Injector {
	in := &Injector{cfg: cfg, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())), stats: map[string]*OpStats{}}
	in.enabled.Store(true)
	return in
}

// Enable turns faults on or off.
func (in *Injector) Enable(on bool) { in.enabled.Store(on) }

func (in *Injector) roll(p float64) bool {
	if p <= 0 {
		return false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.rng.Float64() < p
}

func (in *Injector) spike() time.Duration {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.cfg.SpikeMax <= 0 {
		return 0
	}
	return time.Duration(in.rng.Int64N(int64(in.cfg.SpikeMax))) + 1
}

func (in *Injector) count(op string, f func(*OpStats)) {
	in.mu.Lock()
	defer in.mu.Unlock()
	s := in.stats[op]
	if s == nil {
		s = &OpStats{}
		in.stats[op] = s
	}
	f(s)
}

// Before implements objstore.Faults.
func (in *Injector) Before(op, key string) error {
	in.count(op, func(s *OpStats) { s.Calls++ })
	if !in.enabled.Load() {
		return nil
	}
	in.count(op, func(s *OpStats) { s.Active++ })
	if in.roll(in.cfg.SpikeRate) {
		in.count(op, func(s *OpStats) { s.Spikes++ })
		time.Sleep(in.spike())
	}
	if in.roll(in.cfg.ErrorRate) {
		in.count(op, func(s *OpStats) { s.Errors++ })
		return fmt.Errorf("%s %s: %w", op, key, ErrInjected)
	}
	return nil
}

// After implements objstore.Faults.
func (in *Injector) After(op, key string, err error) error {
	if err != nil || !in.enabled.Load() || (op != objstore.OpPut && op != objstore.OpPutIfAbsent) {
		return err
	}
	if in.roll(in.cfg.GhostRate) {
		in.count(op, func(s *OpStats) { s.Ghosts++ })
		return fmt.Errorf("%s %s landed but reported failure: %w", op, key, ErrInjected)
	}
	return nil
}

// Stats returns a copy of the per-operation counters.
func (in *Injector) Stats() map[string]OpStats {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[string]OpStats, len(in.stats))
	for k, v := range in.stats {
		out[k] = *v
	}
	return out
}

// Total sums Stats over every operation.
func (in *Injector) Total() OpStats {
	var t OpStats
	for _, s := range in.Stats() {
		t = t.add(s)
	}
	return t
}

// Summary is a one-line, sorted rendering of Stats for logs and docs.
func (in *Injector) Summary() string {
	st := in.Stats()
	var b strings.Builder
	t := in.Total()
	fmt.Fprintf(&b, "total calls=%d (faults on: %d) errors=%d ghosts=%d spikes=%d;", t.Calls, t.Active, t.Errors, t.Ghosts, t.Spikes)
	for _, op := range slices.Sorted(maps.Keys(st)) {
		s := st[op]
		fmt.Fprintf(&b, " %s=%d/%d/%d/%d", op, s.Calls, s.Errors, s.Ghosts, s.Spikes)
	}
	return b.String()
}

// Step names one point of the merge protocol, recognised by the bucket call that crosses
// it: the Nth call (1-based, counted while the hook is armed) of Op on a key containing
// KeyContains, either before the call runs (When "before": the call never happens) or after
// it succeeded (When "after": the call landed).
type Step struct {
	Name        string
	Op          string
	KeyContains string
	When        string // "before" or "after"
	Nth         int
	// Phase is when the hook is armed: "merge" (default: from Prepare on) or "append"
	// (from the first append on, for the write-path rows of the crash table).
	Phase string
}

// MergeSteps are the crash points of docs/FORMAT.md §6 the crash matrix kills at: the
// write path (armed from the first append) and the merge protocol (armed from Prepare).
var MergeSteps = []Step{
	{Name: "append-after-wal-put", Op: objstore.OpPutIfAbsent, KeyContains: "/wal/", When: "after", Nth: 4, Phase: "append"},
	{Name: "seal-after-gen-file", Op: objstore.OpPut, KeyContains: "/gen/", When: "after", Nth: 2, Phase: "append"},
	{Name: "seal-after-manifest", Op: objstore.OpPutIfAbsent, KeyContains: "/manifest/", When: "after", Nth: 3, Phase: "append"},
	{Name: "during-read", Op: objstore.OpGet, KeyContains: "/gen/", When: "before", Nth: 2},
	{Name: "after-staging", Op: objstore.OpPut, KeyContains: "/data/m-", When: "after", Nth: 1},
	{Name: "after-claim", Op: objstore.OpPutIfAbsent, KeyContains: "/attempts/", When: "after", Nth: 1},
	{Name: "before-base-commit", Op: objstore.OpPutIfAbsent, KeyContains: "/_versions/", When: "before", Nth: 1},
	{Name: "after-base-commit", Op: objstore.OpPutIfAbsent, KeyContains: "/_versions/", When: "after", Nth: 1},
	{Name: "during-drain", Op: objstore.OpPutIfAbsent, KeyContains: "/manifest/", When: "before", Nth: 1},
	{Name: "after-drain", Op: objstore.OpPutIfAbsent, KeyContains: "/manifest/", When: "after", Nth: 1},
	{Name: "during-cleanup", Op: objstore.OpDelete, KeyContains: "/gen/", When: "after", Nth: 1},
}

// StepByName finds a MergeSteps entry.
func StepByName(name string) (Step, bool) {
	for _, s := range MergeSteps {
		if s.Name == name {
			return s, true
		}
	}
	return Step{}, false
}

// StepHook is a objstore.Faults that calls Hit when its step is reached while armed. Hit
// typically kills the process (SIGKILL to itself), so nothing after the step runs.
type StepHook struct {
	Step  Step
	Hit   func(Step)
	armed atomic.Bool
	n     atomic.Int64
	hits  atomic.Int64
}

// Arm starts (or stops) counting calls towards the step.
func (h *StepHook) Arm(on bool) { h.armed.Store(on) }

// Hits is how often the step was reached (more than once only if Hit returns).
func (h *StepHook) Hits() int64 { return h.hits.Load() }

func (h *StepHook) match(op, key string) bool {
	return h.armed.Load() && op == h.Step.Op && strings.Contains(key, h.Step.KeyContains)
}

// Before implements objstore.Faults.
func (h *StepHook) Before(op, key string) error {
	if h.Step.When == "before" && h.match(op, key) && h.n.Add(1) == int64(h.Step.Nth) {
		h.hits.Add(1)
		h.Hit(h.Step)
	}
	return nil
}

// After implements objstore.Faults.
func (h *StepHook) After(op, key string, err error) error {
	if err == nil && h.Step.When == "after" && h.match(op, key) && h.n.Add(1) == int64(h.Step.Nth) {
		h.hits.Add(1)
		h.Hit(h.Step)
	}
	return err
}
