// Package store is walkeeper's LSM "MemWAL" store on object storage: per (kind, name), a
// base table of sorted Parquet runs plus, per writer shard, a write-ahead log and sealed
// generations (Arrow IPC files) waiting to be merged into the base. It has no Temporal
// import; workflows drive its merges through activities.
//
// # Merge
//
// A merge folds a shard's oldest pending generations into the base, in phases that may run
// in different processes; each file's header says which lock its phase holds:
//
//	merge_repair.go   Repair: finish what an interrupted merge of the shard left behind
//	merge_plan.go     planMerge: which generations a pass folds, fitted to the budget (pure)
//	merge_prepare.go  Prepare: read, merge newest-per-key (merge_iter.go), stage a run
//	                  (merge_gather.go) that no manifest references yet
//	merge_claim.go    claim each attempt "commit" or "abort": exactly one wins
//	merge_publish.go  CommitRound: one base version for the prepared merges of 1..64 shards
//	merge_finish.go   drain the merged generations, delete their files, drop the claims
//	merge_abort.go    Abort: the other way out of a prepared attempt
//	merge.go          MergeOnce/MergeAll, the in-process driver
//
// docs/FORMAT.md ("Merge protocol", "Crash table") is the protocol and its invariants; the
// code that keeps an invariant says so in an INVARIANT: comment. Across processes every
// publish is a put-if-absent, and that is what makes commits safe; mergeLock only orders
// this process's cached view of the base against its prepares' planning.
//
// # Budget
//
// A prepare reserves its whole initial allowance in one acquire before reading and only
// grows without waiting afterwards, so merges cannot deadlock on the budget. Every buffer it
// allocates is charged to that reservation (memAccount): a generation that does not fit ends
// the plan at the prefix before it (the growth rule), an Arrow allocation past it fails the
// prepare with ErrBudgetBusy (a panic in race builds). A read holds at most one group's
// read-budget reservation and never waits while holding it.
//
// # Locks and naming
//
// A function whose name ends in Locked REQUIRES its caller to hold the lock it names (or
// the obvious one of its receiver) and never takes it itself, as in pebble and in worker/.
// A function that takes a lock says so in its name or comment instead (publishBaseThenSwap)
// and carries "REQUIRES: <lock> not held by the caller". REQUIRES: comments state every
// such precondition at the function.
//
// Locks of a Store and what they guard:
//
//	Store.mergeLock  (RWMutex) merge phases of this process: shared for Repair and Prepare,
//	                 exclusive for the in-memory swap after the base publish of CommitRound
//	                 and quarantine, and for compaction's read-check-publish of the base
//	Store.writerMu   Store.w, Store.closed and Store.evicted (and Store.pins' increments)
//	Store.shardsMu   Store.shards (the per-shard chain handles)
//	writer.sealMu    one seal at a time per writer
//	writer.mu        the writer's memtables, manifest, positions and death
//	chain.mu         a chain's cached latest version
//	fileCache.mu     the decoded-file cache
//	bufferPool.mu    a Budget's pooled merge buffers
//	DB.mu            DB.stores, DB.leaving, DB.closed and the eviction claims
//	targetLocks.mu   the table of per-target locks (resident.go)
//
// Lock order (take left before right; never the other way):
//
//	mergeLock → writerMu → writer.mu
//	writer.sealMu → writer.mu
//	DB's per-target lock (DB.locks) → DB.mu
//	DB's per-target lock → writerMu, and → writer.sealMu → writer.mu   (eviction, resident.go)
//	DB.mu, targetLocks.mu, shardsMu, chain.mu, fileCache.mu and bufferPool.mu are leaves:
//	nothing else is taken while one of them is held. The Budget's locks are taken only
//	inside its own methods.
//
// Appends and reads never take mergeLock: appends go to the writer, and reads are snapshot
// reads over immutable objects (read.go), so neither waits on a merge.
package store
