package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/target"
)

// TestMergeWalStatusBoundedAtScale: a run of a store with MaxCarriedShards shards, all but a
// few failed with a failure text of the longest kind a run records, answers its status query
// in under MaxPayloadBytes (far below the 4 MiB a query answer may have), in-flight shards
// listed first, with the totals of every shard.
func TestMergeWalStatusBoundedAtScale(t *testing.T) {
	r := &mergeRun{target: target.Target{Kind: target.KindGeneric, Name: "gs"}, tr: &tracker{onChange: func() {}}, phase: contract.PhaseMerging, workflowRun: 1}
	long := contract.FailureText(strings.Repeat("permission denied on wal object; ", 1000))
	for i := range contract.MaxCarriedShards {
		sh := &shardRun{res: contract.ShardMergeResult{Shard: fmt.Sprintf("%036d", i), Reclaimed: 1, Finished: true, Error: long}, phase: contract.ShardFailed}
		if i%1000 == 999 {
			sh.res = contract.ShardMergeResult{Shard: sh.res.Shard, Reclaimed: 1, Pending: 5}
			sh.phase = contract.ShardPreparing
		}
		r.shards = append(r.shards, sh)
	}

	every, err := json.Marshal(r.statusOfEveryShard())
	require.NoError(t, err)
	require.Greater(t, len(every), grpcMessageLimit, "the scale passes a query's limit when every shard is listed")
	st := r.status()
	b, err := json.Marshal(st)
	require.NoError(t, err)
	require.LessOrEqual(t, len(b), contract.MaxPayloadBytes, "status answer of %d shards", len(r.shards))
	t.Logf("status of %d shards: %d bytes listing every shard, %d bytes answered", len(r.shards), len(every), len(b))
	require.Len(t, st.Shards, contract.MaxStatusShards)
	require.Equal(t, contract.MaxCarriedShards-contract.MaxStatusShards, st.ShardsOmitted)
	require.Equal(t, contract.MaxCarriedShards, st.Reclaimed)
	require.Equal(t, 4*5, st.Pending)
	for i := range 4 {
		require.Equal(t, contract.ShardPreparing, st.Shards[i].Phase)
	}
	require.Equal(t, contract.ShardFailed, st.Shards[4].Phase)
	require.NotEmpty(t, st.Shards[4].Error)
	require.LessOrEqual(t, len(st.Shards[4].Error), contract.MaxStatusErrorBytes)
}

// temporalBlobSizeLimitError is the Temporal server's default limit.blobSize.error: a
// continue-as-new whose input is larger is refused.
const temporalBlobSizeLimitError = 2 << 20

// grpcMessageLimit is the 4 MiB a gRPC message, a query answer among them, may have by default.
const grpcMessageLimit = 4 << 20

// TestMergeWalCarryBoundedAtScale: a run of MaxCarriedShards shards, all but one failed with
// a failure text of the longest kind a run records, hands over a carry under the 2 MiB
// Temporal refuses a continue-as-new's input at, and the carry still passes the continued
// run's input check.
func TestMergeWalCarryBoundedAtScale(t *testing.T) {
	r := &mergeRun{target: target.Target{Kind: target.KindGeneric, Name: "gs"}, tr: &tracker{onChange: func() {}}, workflowRun: 7, pendingAtStart: 1 << 30}
	long := contract.FailureText(strings.Repeat("storage: get wal/97908969-7ded-55ff-a5f4-1d804332abc7/gen/00000041-3.arrow: permission denied; ", 100))
	for i := range contract.MaxCarriedShards {
		res := contract.ShardMergeResult{Shard: fmt.Sprintf("97908969-7ded-55ff-a5f4-%012d", i), Reclaimed: 4096, Passes: 1000,
			BaseVersion: 1 << 40, Restarts: 3, SharedQueue: true, Finished: true, Error: long,
			ErrorType: contract.ErrTypeStalePreparation, Permanent: true, BytesMerged: 1 << 40}
		if i == 0 {
			res.Finished, res.Error, res.ErrorType, res.Permanent, res.Pending = false, "", "", false, 4096
		}
		r.shards = append(r.shards, &shardRun{res: res})
	}

	uncut, err := json.Marshal(r.carry(carryUncut))
	require.NoError(t, err)
	require.Greater(t, len(uncut), temporalBlobSizeLimitError, "the scale passes the limit without the cut")
	c := r.carry(carryJSONCut)
	b, err := json.Marshal(c)
	require.NoError(t, err)
	require.LessOrEqual(t, len(b), temporalBlobSizeLimitError, "carry of %d shards", len(c.Shards))
	t.Logf("carry of %d shards: %d bytes uncut, %d bytes cut", len(c.Shards), len(uncut), len(b))
	require.Len(t, c.Shards, contract.MaxCarriedShards)
	require.LessOrEqual(t, len(c.Shards[1].Error), contract.MaxCarryErrorBytes)
	require.NotEmpty(t, c.Shards[1].Error)
	next := contract.MergeWalInput{Target: "generic:gs", Carry: c}
	require.NoError(t, next.WithDefaults().Validate())
}

// TestFindingStatusOfEscapedErrorsFitsItsPayload: the status answer stays under
// MaxPayloadBytes when every listed error is of characters JSON escapes (an XML error body's
// '<', '>', '&'), where each failed shard's 1 KiB of text encoded to 6 KiB; the shards in
// flight back off after such errors too.
func TestFindingStatusOfEscapedErrorsFitsItsPayload(t *testing.T) {
	r := &mergeRun{target: target.Target{Kind: target.KindGeneric, Name: strings.Repeat("n", 128)},
		tr: &tracker{onChange: func() {}, originalRunID: strings.Repeat("r", 36)}, phase: contract.PhaseMerging, workflowRun: 1}
	escaped := contract.FailureText(strings.Repeat("<", contract.MaxFailureTextBytes+1))
	for i := range contract.MaxCarriedShards {
		shard := fmt.Sprintf("%064d", i)
		sh := &shardRun{res: contract.ShardMergeResult{Shard: shard, Finished: true, Error: escaped}, phase: contract.ShardFailed}
		if i < contract.MaxPrepareConcurrency {
			sh.res = contract.ShardMergeResult{Shard: shard, Pending: 5}
			sh.phase, sh.queue = contract.ShardPreparing, contract.ShardQueue(shard)
			w := r.tr.newWatch(contract.PrepareActivity, shard, sh.queue)
			w.state, w.attempt, w.lastErr = contract.ActivityStateRetrying, 1<<30, escaped
			r.tr.inflight = append(r.tr.inflight, w)
		}
		r.shards = append(r.shards, sh)
	}
	b, err := json.Marshal(r.status())
	require.NoError(t, err)
	t.Logf("status of %d shards with escaped errors: %d bytes", len(r.shards), len(b))
	require.LessOrEqual(t, len(b), contract.MaxPayloadBytes)
}

// TestFindingCarryOfEscapedErrorsFitsABlob: a run of MaxCarriedShards shards, all but one
// failed with errors of characters JSON escapes (an XML error body's '<', '>', '&', control
// bytes), hands over a carry under the 2 MiB Temporal refuses a continue-as-new's input at,
// where 128 bytes of such text each encoded to 768 and the carry to over 4 MB.
func TestFindingCarryOfEscapedErrorsFitsABlob(t *testing.T) {
	r := &mergeRun{target: target.Target{Kind: target.KindGeneric, Name: strings.Repeat("n", 128)}, tr: &tracker{onChange: func() {}},
		workflowRun: contract.MaxCarriedRuns, pendingAtStart: 1 << 62}
	escaped := contract.FailureText(strings.Repeat("<&>\x01", contract.MaxFailureTextBytes))
	for i := range contract.MaxCarriedShards {
		res := contract.ShardMergeResult{Shard: fmt.Sprintf("%064d", i), Reclaimed: 1 << 62, Passes: 1000,
			BaseVersion: 1 << 62, Restarts: 1 << 30, SharedQueue: true, Finished: true, Error: escaped,
			ErrorType: contract.ErrTypeStalePreparation, Permanent: true, BytesMerged: 1 << 62}
		if i == 0 {
			res.Finished, res.Error, res.ErrorType, res.Permanent, res.Pending = false, "", "", false, 1<<62
		}
		r.shards = append(r.shards, &shardRun{res: res})
	}

	text, err := json.Marshal(r.carry(carryTextCut))
	require.NoError(t, err)
	c := r.carry(carryJSONCut)
	b, err := json.Marshal(c)
	require.NoError(t, err)
	t.Logf("carry of %d shards with escaped errors: %d bytes cut to text, %d bytes cut to JSON", len(c.Shards), len(text), len(b))
	require.Greater(t, len(text), temporalBlobSizeLimitError, "the text cut passes the limit at this scale")
	require.LessOrEqual(t, len(b), temporalBlobSizeLimitError, "carry of %d shards", len(c.Shards))
	e, err := json.Marshal(c.Shards[1].Error)
	require.NoError(t, err)
	require.LessOrEqual(t, len(e)-2, contract.MaxCarryErrorBytes)
	require.NotEmpty(t, c.Shards[1].Error)
	next := contract.MergeWalInput{Target: "generic:" + strings.Repeat("n", 128), Carry: c}
	require.NoError(t, next.WithDefaults().Validate())
}
