package poller

import (
	"time"

	"github.com/orderwatch/orderwatch/state"
)

// The keyset cursors inside a bulk second (sweep.bulk) are kept in the
// state file (record "bulk"), each saved in the same transaction as the
// events of the orders it passed: a restart (or a takeover: a quiet
// checkpoint carries the record with the events it matches) goes on from
// where the cursor got instead of reading a 10,000-order second from its
// first order again. A cursor counts only for the second it names (the
// next bulk read of another second starts afresh).

// CursorRecord is the name of the bulk cursors' state record.
const CursorRecord = "bulk"

// cursorJSON is a bulkCursor as the record keeps it.
type cursorJSON struct {
	At    time.Time `json:"at"`
	After int64     `json:"afterId"`
	Ref   time.Time `json:"ref"`
}

type cursorsRecord struct {
	Sweep   *cursorJSON `json:"sweep,omitempty"`
	Recheck *cursorJSON `json:"recheck,omitempty"`
}

func toJSON(c bulkCursor) *cursorJSON {
	if c.after <= 0 {
		return nil
	}
	return &cursorJSON{At: c.at, After: c.after, Ref: c.ref}
}

func fromJSON(c *cursorJSON) bulkCursor {
	if c == nil || c.After <= 0 {
		return bulkCursor{}
	}
	return bulkCursor{at: c.At, after: c.After, ref: c.Ref}
}

// loadCursors reads the cursors once per process (an unreadable record:
// none, the bulk seconds are read from their start).
func (p *Poller) loadCursors() {
	if p.cursorsLoaded {
		return
	}
	p.cursorsLoaded = true
	var r cursorsRecord
	found, err := p.store.LoadRecord(CursorRecord, &r)
	if err != nil {
		p.log.Warn("the keyset cursors in the state file are unreadable: a bulk second under way is read from its start", "record", CursorRecord, "err", err)
		return
	}
	if found {
		p.bulk, p.rebulk = fromJSON(r.Sweep), fromJSON(r.Recheck)
	}
}

// flushCursors commits the cursors with the events pending (the orders
// the cursor passed).
func (s *sweep) flushCursors() error {
	rec := cursorsRecord{Sweep: toJSON(s.p.bulk), Recheck: toJSON(s.p.rebulk)}
	s.pending.Records = append(s.pending.Records, state.Record{Name: CursorRecord, Value: rec})
	return s.flush(nil)
}
