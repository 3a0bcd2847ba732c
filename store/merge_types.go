package store

import "time"

// PreparedMerge is the small, JSON-serialisable reference that Prepare returns and
// CommitRound or Abort consume. It crosses process boundaries (Temporal activity results), so it carries no
// row data: only what is needed to publish or discard the staged files.
type PreparedMerge struct {
	// Target is "<kind>:<name>".
	Target string `json:"target"`
	// Shard is the shard whose flushed generations were merged.
	Shard string `json:"shard"`
	// Generations are the merged generation numbers, ascending, contiguous in pending order.
	Generations []uint64 `json:"generations"`
	// Through is the highest merged generation: the shard's watermark after the commit.
	Through uint64 `json:"through"`
	// Staged are the Parquet files written by this attempt, not yet referenced by any manifest.
	Staged []StagedFile `json:"staged"`
	// WriterEpoch is the shard's writer epoch observed at prepare time.
	WriterEpoch uint64 `json:"writer_epoch"`
	// AttemptKey is the idempotency key of the preparing attempt (workflow ID + activity ID).
	AttemptKey string `json:"attempt_key"`
	// BaseVersion is the base manifest version the preparation read.
	BaseVersion uint64 `json:"base_version"`
	// Bytes is the in-memory size of the rows read from the generations.
	Bytes int64 `json:"bytes"`
	// Rows is the number of rows written to the staged files after deduplication.
	Rows int64 `json:"rows"`
	// InputRows is the number of rows read from the generations before deduplication.
	InputRows int64 `json:"input_rows"`
}

// StagedFile describes one staged Parquet run.
type StagedFile struct {
	Path   string `json:"path"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	MinKey string `json:"min_key"`
	MaxKey string `json:"max_key"`
	MinSeq int64  `json:"min_seq"`
	MaxSeq int64  `json:"max_seq"`
	// Checksum is the CRC-32C of the staged file, copied into the base manifest.
	Checksum string `json:"crc32c,omitempty"`
}

// PrepareParams selects what one Prepare call may merge.
type PrepareParams struct {
	// Shard to merge; "" means this process's own shard.
	Shard string
	// AttemptKey names the staged files so that a retried prepare overwrites instead of
	// leaking. Empty means a random key (library callers that never retry).
	AttemptKey string
	// MaxGenerations and MaxBytes override the store defaults when non-nil (0 = no cap).
	MaxGenerations *int
	MaxBytes       *int64
	// Progress, if set, is called after each generation is read (for heartbeats).
	Progress func(done, total int)
}

// AbortResult reports one abort.
type AbortResult struct {
	Deleted       int  `json:"deleted"`
	CommitPresent bool `json:"commit_present"`
}

// CompactParams bounds one compaction pass.
type CompactParams struct {
	// MaxRuns is the most runs rewritten per pass (default 16).
	MaxRuns int
	// MaxBytes is the most input bytes rewritten per pass (default 1 GiB, 0 = no cap).
	MaxBytes int64
	// AttemptKey names the output files (see PrepareParams.AttemptKey).
	AttemptKey string
}

// CompactResult reports one compaction pass.
type CompactResult struct {
	BaseVersion    uint64 `json:"base_version"`
	InputRuns      int    `json:"input_runs"`
	OutputRuns     int    `json:"output_runs"`
	RowsIn         int64  `json:"rows_in"`
	RowsOut        int64  `json:"rows_out"`
	DroppedDeletes int64  `json:"dropped_deletes"`
	RunsLeft       int    `json:"runs_left"`
	Committed      bool   `json:"committed"`
}

// ShardStats is one shard's debt.
type ShardStats struct {
	Shard              string    `json:"shard"`
	PendingGenerations int       `json:"pending_generations"`
	PendingBytes       int64     `json:"pending_bytes"`
	Watermark          uint64    `json:"watermark"`
	OldestPending      time.Time `json:"oldest_pending,omitzero"`
	WriterEpoch        uint64    `json:"writer_epoch"`
	// Quarantined counts this shard's generations an operator set aside.
	Quarantined int `json:"quarantined,omitempty"`
}

// Stats is a store's shape, as the stats route and the sweep see it.
type Stats struct {
	Target      string       `json:"target"`
	BaseVersion uint64       `json:"base_version"`
	Runs        int          `json:"runs"`
	Rows        int64        `json:"rows"`
	BaseBytes   int64        `json:"base_bytes"`
	Shards      []ShardStats `json:"shards"`
	// Quarantined counts objects (runs and generations) an operator set aside.
	Quarantined int `json:"quarantined,omitempty"`
}

// TotalPending sums pending generations across shards.
func (s Stats) TotalPending() int {
	n := 0
	for _, sh := range s.Shards {
		n += sh.PendingGenerations
	}
	return n
}
