package store

// The values the merge phases pass on (CommitRound's results are in merge_publish.go, Repair's
// in merge_repair.go).

// PreparedMerge is the reference Prepare returns and CommitRound or Abort consume across
// processes, so it carries no row data, only what is needed to publish or discard the staged
// files.
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
	// Deletes counts the tombstones among Rows, copied into the base manifest; 0 in a
	// record written before it was kept.
	Deletes int64 `json:"deletes,omitempty"`
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
	// MaxGenerations and MaxBytes override the store defaults when non-nil (0 = no cap of
	// their own; MaxPassGenerations and the merge budget still bound a pass).
	MaxGenerations *int
	MaxBytes       *int64
	// Progress, if set, is called after each generation is read (for heartbeats).
	Progress func(done, total int)
}

// AbortResult reports one abort. CommitPresent: the watermark covers the prepared range.
// CommittedByAnother: it does, but the latest base references none of this attempt's staged
// files, so another attempt's run holds the pass and that attempt reports it.
type AbortResult struct {
	Deleted            int  `json:"deleted"`
	CommitPresent      bool `json:"commit_present"`
	CommittedByAnother bool `json:"committed_by_another"`
}
