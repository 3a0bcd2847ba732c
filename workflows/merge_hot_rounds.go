package workflows

import (
	"go.temporal.io/sdk/workflow"
)

// A hot run commits once per round, not once per shard: nobody waits for its commits, so the
// commit loop waits until every pass of the round has asked (or a round's worth of shards has).

// hotRoundCommitsChange is the GetVersion change ID of one commit per hot round.
const hotRoundCommitsChange = "hot-round-commits"

// roundPass is one shard's pass in the current round, counted in mergeRun.preparing while it
// may still ask for a commit.
type roundPass struct{ counted bool }

// joinRound counts a new pass of the round.
func (r *mergeRun) joinRound() *roundPass {
	r.preparing++
	return &roundPass{counted: true}
}

// leaveRound uncounts the pass: it has asked for its commit, or it ends without one.
func (r *mergeRun) leaveRound(p *roundPass) {
	if p.counted {
		p.counted = false
		r.preparing--
	}
}

// rejoinRound counts the pass again: its commit was stale and it prepares again.
func (r *mergeRun) rejoinRound(p *roundPass) {
	if !p.counted {
		p.counted = true
		r.preparing++
	}
}

// awaitRound holds a hot run's commit, whose first request the loop has taken, until every
// pass of the round asked or ended, or limit requests are ready (at once for a run not hot or
// started before hotRoundCommitsChange).
//
// INVARIANT: no deadlock: a counted pass is preparing or waiting for a prepare slot, and ends
// or asks without the commit loop's help.
func (r *mergeRun) awaitRound(ctx workflow.Context, limit int) {
	if !r.hotRoundsCommitOnce || !r.hot {
		return
	}
	// A cancelled wait commits what is ready.
	_ = workflow.Await(ctx, func() bool { return r.preparing == 0 || 1+r.asking >= limit })
}
