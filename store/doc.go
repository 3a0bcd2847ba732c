// Package store is walkeeper's LSM "MemWAL" store on object storage: per (kind, name), a
// base table of sorted Parquet runs plus, per writer shard, a write-ahead log and sealed
// generations (Arrow IPC files) waiting to be merged into the base. It has no Temporal
// import; workflows drive its merges through activities.
//
// # Files
//
// The merge protocol lives in files named after its phases:
//
//	merge_plan.go     planMerge: which generations a pass folds, fitted to the budget (pure)
//	merge_prepare.go  Prepare: read, merge newest-per-key, stage a Parquet run
//	merge_commit.go   Commit (claim, publish, drain, delete) and Abort
//	merge.go          MergeOnce/MergeAll, the in-process driver, and merge metrics
//	merge_iter.go     the one k-way merge iterator shared by reads, merges and compaction
//	merge_gather.go   copying the merge's surviving rows into Arrow records
//	compact.go        planCompaction and CompactBase
//	manifest.go       the manifest model and its pure functions
//	manifest_io.go    version chains on the bucket: loading and publishing manifests
//	format.go         object layout: keys and names
//	alloc.go          memAccount: the budget-charged Arrow allocator merges allocate through
//	read_bound.go     bounded reads: sources opened readFanIn at a time, the read budget
//
// # Merge protocol
//
// A merge of one shard runs in two phases, possibly in different processes (docs/DESIGN.md §3):
//
//  1. Prepare, under the store's merge lock held shared: plan the oldest pending
//     generations of the shard (planMerge, fitted to the memory budget), read them, keep
//     the newest version per key and write the result as a staged run that no manifest
//     references yet. Appends, reads and other prepares go on meanwhile.
//  2. Commit: claim the attempt ("commit"), then publish base version v+1 = runs + the
//     staged run, with the shard's watermark moved to the last merged generation. The
//     conditional write happens before the merge lock is taken; the lock is held
//     exclusively only to swap the cached latest base (O(1)). Then drain the merged
//     generations from the shard manifest and delete their files.
//
// CommitRound (merge_commit_round.go) is Commit for the prepared merges of up to
// MaxRoundShards shards at once: each is checked and claimed as in Commit, and one base
// version publishes all that are still open, each with its own watermark; each is then
// drained as Commit drains one. A stale one is left out without blocking the others.
//
// Abort is the other way out of a prepared attempt: claim "abort", then delete the staged
// files once no commit of the attempt can publish them.
//
// # Invariants
//
// The code that keeps each of these says so in an INVARIANT: comment.
//
//   - Commit object last. A base version is published with put-if-absent, and only after
//     every file it references is written. Readers and other committers see a new state only
//     through that one object, so a crash at any point leaves the old state whole.
//   - Deletes after the commit that makes them garbage. Merged generations are drained and
//     deleted only after the base version that holds their rows is published; compaction
//     inputs only after the version that replaces them; staged files of an attempt only
//     when no commit of it can publish them. A crash between publish and drain is repaired
//     by the next prepare (reconcile).
//   - Watermarks per shard. base.Watermarks[shard] is the highest generation of the shard
//     folded into the base; readers ignore generations at or below it. Watermarks only grow,
//     and a merge takes a contiguous prefix of the pending generations, so a watermark never
//     skips a generation. watermarkCoverage classifies a prepared range against it.
//   - Claims. Each attempt has one claim object, written with put-if-absent, holding
//     "commit" or "abort": exactly one can win, so a late commit never publishes files an
//     abort deleted and an abort never deletes files a commit may publish. A claim is
//     deleted once the watermark makes it meaningless (dropClaim).
//   - Drain. Drains and other shard-manifest edits are relative ("remove exactly these
//     generations") and re-applied on every lost race, so a seal that lands meanwhile is
//     never lost.
//   - Budget. A prepare reserves its whole initial allowance in one acquire before reading
//     and only grows without waiting afterwards, so merges cannot deadlock on the budget.
//     Every buffer it allocates is charged to that reservation (memAccount): a generation
//     that does not fit ends the plan at the prefix before it, an Arrow allocation past it
//     fails the prepare with ErrBudgetBusy (a panic in race builds). A read holds at most
//     one group's read-budget reservation and never waits while holding it.
//
// Across processes, every publish is a put-if-absent and that is what makes commits safe;
// the merge lock only orders this process's cached view of the base against its prepares'
// planning. A prepare may still plan a range that a commit published a moment earlier, as a
// prepare in another process always could; the commit's watermark check catches it.
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
//	Store.mergeLock  (RWMutex) merge phases of this process: shared for Prepare, exclusive
//	                 for the in-memory swap after the base publish of Commit, CommitRound
//	                 and quarantine, and for the whole of compaction
//	Store.writerMu   Store.w, Store.closed and Store.evicted
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
