package store

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the store's Prometheus collectors. No label carries a store or shard name:
// those are unbounded. Options.Metrics may be nil: nothing is then registered.
type Metrics struct {
	ReadPendingGenerations prometheus.Histogram
	ReadShards             prometheus.Histogram
	ReadsRefused           prometheus.Counter
	ReadsRetried           prometheus.Counter
	ReadsBudgetBusy        prometheus.Counter
	ReadRunRowsDecoded     prometheus.Counter
	FlushTotal             *prometheus.CounterVec // kind, result
	MergeTotal             *prometheus.CounterVec // kind, result
	MergePhaseSeconds      *prometheus.HistogramVec
	CommitLockSeconds      prometheus.Histogram
	BudgetWaitSeconds      prometheus.Histogram
	GenerationsReclaimed   *prometheus.CounterVec // kind
	AppendRows             *prometheus.CounterVec // kind
	AppendSeconds          prometheus.Histogram
	WALObjects             prometheus.Counter
	CompactTotal           *prometheus.CounterVec // result
	CorruptObjects         *prometheus.CounterVec // kind
	ResidentStores         prometheus.Gauge
	ResidentEvictions      *prometheus.CounterVec // reason, result
	ForeignObjects         *prometheus.CounterVec // place
}

// NewMetrics registers the store collectors on reg. budget may be nil; its gauges then read 0.
func NewMetrics(reg prometheus.Registerer, budget *Budget) *Metrics {
	var all []prometheus.Collector
	add := func(c prometheus.Collector) { all = append(all, c) }
	counter := func(name, help string) (c prometheus.Counter) {
		c = prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
		add(c)
		return c
	}
	counterVec := func(name, help string, labels ...string) (c *prometheus.CounterVec) {
		c = prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		add(c)
		return c
	}
	histogram := func(name, help string, buckets []float64) (h prometheus.Histogram) {
		h = prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
		add(h)
		return h
	}
	m := &Metrics{
		ReadPendingGenerations: histogram("walkeeper_read_pending_generations", "Pending generations per shard, sampled on every read.", []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}),
		ReadShards:             histogram("walkeeper_read_shards", "Shards (writer instance ids that ever wrote to the store) a read loads the manifest of, sampled on every read.", []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096}),
		ReadsRefused:           counter("walkeeper_read_refused_total", "Reads refused because a shard or the store had too many pending generations."),
		ReadsBudgetBusy:        counter("walkeeper_read_budget_busy_total", "Reads refused (HTTP 503 budget_busy) because the read budget could not admit their files within the wait."),
		ReadRunRowsDecoded:     counter("walkeeper_read_run_rows_decoded_total", "Rows of base runs the cache does not keep that Gets and Lists decoded (in record batches). Against the rows reads return, it is their decode amplification."),
		ReadsRetried:           counter("walkeeper_read_retried_total", "Reads retried because a merge or compaction removed a file mid-read."),
		FlushTotal:             counterVec("walkeeper_flush_total", "Seals by kind and result (sealed, empty, failed, timeout, fenced).", "kind", "result"),
		MergeTotal:             counterVec("walkeeper_merge_total", "Merge commits by kind and result (merged, already_committed, stale, failed, aborted).", "kind", "result"),
		MergePhaseSeconds:      prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "walkeeper_merge_phase_seconds", Help: "Duration of merge phases (read, write, commit, drain, delete).", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"phase"}),
		CommitLockSeconds:      histogram("walkeeper_merge_commit_lock_seconds", "How long a merge commit or a compaction held the store's merge lock, which appends and reads never take.", prometheus.ExponentialBuckets(0.00005, 2, 16)),
		BudgetWaitSeconds:      histogram("walkeeper_merge_budget_wait_seconds", "Time a merge waited for its initial memory reservation.", prometheus.ExponentialBuckets(0.001, 4, 10)),
		GenerationsReclaimed:   counterVec("walkeeper_merge_generations_reclaimed_total", "Generations drained by merges.", "kind"),
		AppendRows:             counterVec("walkeeper_append_rows_total", "Rows made durable by appends.", "kind"),
		AppendSeconds:          histogram("walkeeper_append_seconds", "Append latency until durable.", prometheus.ExponentialBuckets(0.0001, 3, 12)),
		WALObjects:             counter("walkeeper_wal_objects_total", "WAL objects written (one per group commit)."),
		CompactTotal:           counterVec("walkeeper_compact_total", "Compaction passes by result (committed, noop, inputs_changed, failed).", "result"),
		CorruptObjects:         counterVec("walkeeper_corrupt_objects_total", "Reads of a stored object (generation, base run, WAL object) that found it damaged: no checksum, a checksum mismatch, longer than its declared size, or undecodable. Counts attempts, not distinct objects; the damaged object blocks its shard or key range until an operator restores it.", "kind"),
		ResidentStores:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "walkeeper_resident_stores", Help: "Stores this process has open (bounded by --resident-stores-max; idle ones are evicted after --resident-idle)."}),
		ResidentEvictions:      counterVec("walkeeper_resident_evictions_total", "Resident stores evicted (memtable sealed, writer stopped, handle dropped) by reason (idle, max) and result (evicted, failed).", "reason", "result"),
		ForeignObjects:         counterVec("walkeeper_foreign_objects_total", "Keys a listing skipped because walkeeper did not write them (a stray file under the storage root), by place: registry, wal, generations, manifests, shards, demand, staging, claims. Counts each time a listing meets one.", "place"),
	}
	add(m.MergePhaseSeconds)
	add(m.ResidentStores)
	// Only Prometheus reads the budget's gauges, so Metrics keeps no field for them.
	add(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walkeeper_merge_budget_reserved_bytes", Help: "Bytes currently reserved from the process merge budget."}, func() float64 { return float64(budget.Reserved()) }))
	add(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "walkeeper_merge_budget_limit_bytes", Help: "The process merge budget (0 = unlimited)."}, func() float64 { return float64(budget.Limit()) }))
	for _, reason := range []string{EvictIdle, EvictMax} {
		for _, result := range []string{"evicted", "failed"} {
			m.ResidentEvictions.WithLabelValues(reason, result)
		}
	}
	if reg != nil {
		reg.MustRegister(all...)
	}
	return m
}
