package store

import (
	"math"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// A WAL object is bounded on both sides (decision 0731): the WAL committer splits a group
// commit into objects of at most MemtableBytes of rows (walGroups), and a reader refuses one
// longer than any v1 build could have written (walReadLimit) without reading it whole.

// walOverheadBytes bounds what a WAL object's bytes add to the decoded estimate of its rows,
// which is above each row's encoded bytes: the frame, the Arrow schema twice (message and
// footer) of up to 256 fields, the record batch's metadata and each buffer's padding.
const walOverheadBytes = 1 << 20

// walReadLimit is the longest WAL object this process reads. An earlier v1 build wrote all a
// group commit held as one object: appends whose decoded rows were reserved together from the
// append budget until answered, plus tombstones, which are not charged, one row each and at
// most GroupCommitMaxRows, since the batch stops growing at that many rows.
func (db *DB) walReadLimit() int64 {
	o := &db.opts
	if o.maxWALBytes > 0 {
		return o.maxWALBytes
	}
	// Each term is clamped to a quarter of int64, far beyond any machine, so the sum cannot wrap.
	const most = math.MaxInt64 / 4
	memtable := min(o.MemtableBytes, most/appendBudgetFactor)
	tombstones := min(int64(o.GroupCommitMaxRows), most/rowcodec.MaxTombstoneBytes)
	return appendBudgetFactor*memtable + tombstones*rowcodec.MaxTombstoneBytes + walOverheadBytes
}

// walGroups cuts a batch, in order, into the groups the WAL committer writes as one object
// each: a group's rows decode to at most limit bytes, each request whole so that an append
// stays atomic; a request alone over limit, which only a tombstone can be since an append over
// MemtableBytes is refused, is a group of its own.
func walGroups(batch []*appendReq, limit int64) [][]*appendReq {
	var groups [][]*appendReq
	start, size := 0, int64(0)
	for i, r := range batch {
		if i > start && size+r.bytes > limit {
			groups = append(groups, batch[start:i])
			start, size = i, 0
		}
		size += r.bytes
	}
	return append(groups, batch[start:])
}
