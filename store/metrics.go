package store

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/walkeeper/walkeeper/store/objstore"
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
	WALWritesLate          prometheus.Counter
	CompactTotal           *prometheus.CounterVec // result
	CorruptObjects         *prometheus.CounterVec // kind
	ResidentStores         prometheus.Gauge
	ResidentEvictions      *prometheus.CounterVec // reason, result
	ForeignObjects         *prometheus.CounterVec // place
	StorageAnswersRefused  *prometheus.CounterVec // reason
}

// NewMetrics registers the store collectors on reg. budget may be nil; its gauges then read 0.
func NewMetrics(reg prometheus.Registerer, budget *Budget) *Metrics {
	f := promauto.With(reg) // nil registers nothing
	m := &Metrics{
		ReadPendingGenerations: f.NewHistogram(prometheus.HistogramOpts{Name: "walkeeper_read_pending_generations", Help: "Pending generations per shard, sampled on every read.", Buckets: []float64{0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192}}),
		ReadShards:             f.NewHistogram(prometheus.HistogramOpts{Name: "walkeeper_read_shards", Help: "Shards (writer instance ids that ever wrote to the store) a read loads the manifest of, sampled on every read.", Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096}}),
		ReadsRefused:           f.NewCounter(prometheus.CounterOpts{Name: "walkeeper_read_refused_total", Help: "Reads refused because a shard or the store had too many pending generations."}),
		ReadsBudgetBusy:        f.NewCounter(prometheus.CounterOpts{Name: "walkeeper_read_budget_busy_total", Help: "Reads refused (HTTP 503 budget_busy) by the read budget: not admitted within the wait, or needing more than their reservation could grow by."}),
		ReadRunRowsDecoded:     f.NewCounter(prometheus.CounterOpts{Name: "walkeeper_read_run_rows_decoded_total", Help: "Rows of base runs the cache does not keep that Gets and Lists decoded (in record batches). Against the rows reads return, it is their decode amplification."}),
		ReadsRetried:           f.NewCounter(prometheus.CounterOpts{Name: "walkeeper_read_retried_total", Help: "Reads retried because a merge or compaction removed a file mid-read."}),
		FlushTotal:             f.NewCounterVec(prometheus.CounterOpts{Name: "walkeeper_flush_total", Help: "Seals by kind and result (sealed, empty, failed, timeout, fenced)."}, []string{"kind", "result"}),
		MergeTotal:             f.NewCounterVec(prometheus.CounterOpts{Name: "walkeeper_merge_total", Help: "Merge commits by kind and result (merged, already_committed, stale, failed, aborted)."}, []string{"kind", "result"}),
		MergePhaseSeconds:      f.NewHistogramVec(prometheus.HistogramOpts{Name: "walkeeper_merge_phase_seconds", Help: "Duration of merge phases (read, write, commit, drain, delete).", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}, []string{"phase"}),
		CommitLockSeconds:      f.NewHistogram(prometheus.HistogramOpts{Name: "walkeeper_merge_commit_lock_seconds", Help: "How long a merge commit or a compaction held the store's merge lock, which appends and reads never take.", Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}),
		BudgetWaitSeconds:      f.NewHistogram(prometheus.HistogramOpts{Name: "walkeeper_merge_budget_wait_seconds", Help: "Time a merge waited for its initial memory reservation.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		GenerationsReclaimed:   f.NewCounterVec(prometheus.CounterOpts{Name: "walkeeper_merge_generations_reclaimed_total", Help: "Generations drained by merges."}, []string{"kind"}),
		AppendRows:             f.NewCounterVec(prometheus.CounterOpts{Name: "walkeeper_append_rows_total", Help: "Rows made durable by appends."}, []string{"kind"}),
		AppendSeconds:          f.NewHistogram(prometheus.HistogramOpts{Name: "walkeeper_append_seconds", Help: "Append latency until durable.", Buckets: prometheus.ExponentialBuckets(0.0001, 3, 12)}),
		WALObjects:             f.NewCounter(prometheus.CounterOpts{Name: "walkeeper_wal_objects_total", Help: "WAL objects written (one per group commit, more when its rows pass the memtable bound)."}),
		WALWritesLate:          f.NewCounter(prometheus.CounterOpts{Name: "walkeeper_wal_writes_late_total", Help: "WAL writes that landed more than 10 minutes after their rows were sequenced: their rows are durable and read, but the append or delete was answered as stalled (HTTP 504 timeout), not acknowledged, so that compaction need not wait for such writes."}),
		CompactTotal:           f.NewCounterVec(prometheus.CounterOpts{Name: "walkeeper_compact_total", Help: "Compaction passes by result (committed, noop, inputs_changed, failed)."}, []string{"result"}),
		CorruptObjects:         f.NewCounterVec(prometheus.CounterOpts{Name: "walkeeper_corrupt_objects_total", Help: "Damaged stored objects (generation, base run, WAL object) this process met: no checksum, a checksum mismatch, not its declared size, a WAL object over its limit, or undecodable. Each object once per process (the last 1024 remembered), however often it is read; the damaged object blocks its shard or key range until an operator restores or quarantines it."}, []string{"kind"}),
		ResidentStores:         f.NewGauge(prometheus.GaugeOpts{Name: "walkeeper_resident_stores", Help: "Stores this process has open (bounded by --resident-stores-max; idle ones are evicted after --resident-idle)."}),
		ResidentEvictions:      f.NewCounterVec(prometheus.CounterOpts{Name: "walkeeper_resident_evictions_total", Help: "Resident stores evicted (memtable sealed, writer stopped, handle dropped) by reason (idle, max) and result (evicted, failed)."}, []string{"reason", "result"}),
		ForeignObjects:         f.NewCounterVec(prometheus.CounterOpts{Name: "walkeeper_foreign_objects_total", Help: "Keys a listing skipped because walkeeper did not write them (a stray file under the storage root), by place: registry, wal, generations, manifests, shards, demand, staging, compaction, claims. Counts each time a listing meets one."}, []string{"place"}),
		StorageAnswersRefused:  f.NewCounterVec(prometheus.CounterOpts{Name: "walkeeper_storage_answers_refused_total", Help: "Storage operations that failed because the storage answered what no S3, GCS or Azure server sends, by reason: malformed_listing, malformed_response, too_large (an answer's body past its limit), access_refused (a GCS 403). Once per operation; the operation's error names it and its key."}, []string{"reason"}),
	}
	// Only Prometheus reads the budget's gauges, so Metrics keeps no field for them.
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "walkeeper_merge_budget_reserved_bytes", Help: "Bytes currently reserved from the process merge budget."}, func() float64 { return float64(budget.Reserved()) })
	f.NewGaugeFunc(prometheus.GaugeOpts{Name: "walkeeper_merge_budget_limit_bytes", Help: "The process merge budget (0 = unlimited)."}, func() float64 { return float64(budget.Limit()) })
	for _, reason := range []string{EvictIdle, EvictMax} {
		for _, result := range []string{"evicted", "failed"} {
			m.ResidentEvictions.WithLabelValues(reason, result)
		}
	}
	for _, reason := range objstore.RefusedReasons() {
		m.StorageAnswersRefused.WithLabelValues(reason)
	}
	return m
}
