package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/walkeeper/walkeeper/store/rowcodec"
)

// Append limits: an append is bounded in rows and decoded size before its rows are
// materialised, and its decoded size is charged to the DB's append budget while in flight, so
// concurrent appends cannot multiply memory.

// MaxKeyBytes is the longest row key, in bytes, that appends, deletes, gets and List
// cursors accept (ErrKeyTooLong; rowcodec.MaxKeyBytes).
const MaxKeyBytes = rowcodec.MaxKeyBytes

// DefaultMemtableBytes is Options.MemtableBytes when unset.
const DefaultMemtableBytes = 64 << 20

// appendBudgetFactor sizes the append budget to appendBudgetFactor × MemtableBytes, so two
// appends of the largest size decode side by side.
const appendBudgetFactor = 2

// appendBudgetWait is how long an append waits for the append budget before ErrBudgetBusy.
const appendBudgetWait = 5 * time.Second

// AppendJSON decodes body, a JSON array of row objects, as Codec.DecodeJSON does and appends
// the rows. Before any row is materialised it checks the count and the size estimated from
// the text (ErrAppendTooLarge) and reserves the estimate from the append budget until the
// rows are in the memtable (ErrBudgetBusy past appendBudgetWait).
func (s *Store) AppendJSON(ctx context.Context, body []byte) (AppendResult, error) {
	o := &s.db.opts
	if !json.Valid(body) {
		_, err := s.codec.DecodeJSON(body, o.MaxRowBytes)
		return AppendResult{}, err
	}
	if err := s.refuseAtPendingMax(ctx); err != nil {
		return AppendResult{}, err
	}
	n, size, err := s.codec.MeasureJSON(body, s.checkAppendSize)
	if err != nil {
		return AppendResult{}, err
	}
	res, err := s.chargeAppend(ctx, size)
	if err != nil {
		return AppendResult{}, err
	}
	defer res.Release()
	rows, err := s.codec.DecodeValidJSON(body, o.MaxRowBytes, n)
	if err != nil || len(rows) == 0 {
		return AppendResult{}, err
	}
	return s.submit(ctx, rows, size, false)
}

// refuseAtPendingMax refuses an append to a shard at PendingMax before its body is decoded,
// only to save work: submit's admit is the check that holds.
func (s *Store) refuseAtPendingMax(ctx context.Context) error {
	if s.db.opts.PendingMax <= 0 {
		return nil
	}
	w, err := s.writer(ctx)
	if err != nil {
		return err
	}
	release, err := w.admit(ctx)
	if err != nil {
		return err
	}
	release()
	return nil
}

// checkAppendSize refuses an append over MaxAppendRows rows or MemtableBytes decoded.
func (s *Store) checkAppendSize(rows int, size int64) error {
	o := &s.db.opts
	if o.MaxAppendRows > 0 && rows > o.MaxAppendRows {
		return fmt.Errorf("%s: %w: %d rows, more than the limit of %d rows per append", s.target, ErrAppendTooLarge, rows, o.MaxAppendRows)
	}
	if size > o.MemtableBytes {
		return fmt.Errorf("%s: %w: its rows decode to about %d bytes, more than the memtable bound of %d bytes", s.target, ErrAppendTooLarge, size, o.MemtableBytes)
	}
	return nil
}

// chargeAppend reserves size bytes of the append budget, waiting at most appendBudgetWait.
func (s *Store) chargeAppend(ctx context.Context, size int64) (*Reservation, error) {
	res, timedOut, err := reserveWithin(ctx, s.db.appends, size, appendBudgetWait)
	if timedOut {
		return nil, fmt.Errorf("%s: an append of about %d decoded bytes waited %s for the append budget of %d bytes: %w",
			s.target, size, appendBudgetWait, s.db.appends.Limit(), ErrBudgetBusy)
	}
	return res, err
}
