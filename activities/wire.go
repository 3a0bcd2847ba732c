package activities

import (
	"github.com/walkeeper/walkeeper/contract"
	"github.com/walkeeper/walkeeper/store"
)

// The boundary between the store's structs and the contract's wire types. Workflow history
// carries only contract types, so a field the store renames or retags changes nothing
// recorded; a field the store adds must be carried here (wire_test.go fails until it is).

// preparedToWire copies a store preparation into its wire form (nil stays nil).
func preparedToWire(p *store.PreparedMerge) *contract.PreparedMerge {
	if p == nil {
		return nil
	}
	w := &contract.PreparedMerge{
		Target:      p.Target,
		Shard:       p.Shard,
		Generations: p.Generations,
		Through:     p.Through,
		WriterEpoch: p.WriterEpoch,
		AttemptKey:  p.AttemptKey,
		BaseVersion: p.BaseVersion,
		Bytes:       p.Bytes,
		Rows:        p.Rows,
		InputRows:   p.InputRows,
	}
	if p.Staged != nil {
		w.Staged = make([]contract.StagedFile, len(p.Staged))
		for i, f := range p.Staged {
			w.Staged[i] = contract.StagedFile(f)
		}
	}
	return w
}

// preparedFromWire copies a wire preparation back into the store's form.
func preparedFromWire(w *contract.PreparedMerge) *store.PreparedMerge {
	p := &store.PreparedMerge{
		Target:      w.Target,
		Shard:       w.Shard,
		Generations: w.Generations,
		Through:     w.Through,
		WriterEpoch: w.WriterEpoch,
		AttemptKey:  w.AttemptKey,
		BaseVersion: w.BaseVersion,
		Bytes:       w.Bytes,
		Rows:        w.Rows,
		InputRows:   w.InputRows,
	}
	if w.Staged != nil {
		p.Staged = make([]store.StagedFile, len(w.Staged))
		for i, f := range w.Staged {
			p.Staged[i] = store.StagedFile(f)
		}
	}
	return p
}
