package state

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
)

// Where the orders of the snapshot stand: per status how many and since
// when (Dwell), and the orders themselves, page by page (ListOrders). Both
// read the snapshot only, never the shop. "Since" is diff.State.StatusSince:
// a lower bound of the time an order has been in its status (see
// diff.EnteredStatus).

// StatusDwell is one status of the snapshot.
type StatusDwell struct {
	Status order.Decimal // the zero Decimal: orders without a status
	Orders int
	// Oldest is the earliest StatusSince of the status's orders: the
	// longest-waiting order entered the status no later than this. Zero
	// when no order of the status has a known time (no updatedAt).
	Oldest time.Time
}

// Dwell counts the snapshot's orders per status and finds, per status, the
// earliest time one of them entered it: one scan of the orders bucket in one
// read transaction (see BenchmarkDwell1M for its cost). The result is sorted
// by status (numeric value; orders without a status first).
func (s *Store) Dwell() ([]StatusDwell, error) {
	type agg struct {
		orders int
		oldest int64 // unix nanoseconds; 0 unknown
		known  bool
	}
	byStatus := map[string]*agg{}
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketOrders).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			status, since, known, err := peekDwell(v)
			if err != nil {
				return newFileError(ErrCorrupt, err, "state file %s: order %d", s.path, binary.BigEndian.Uint64(k))
			}
			a := byStatus[string(status)] // no allocation for the look-up
			if a == nil {
				a = &agg{}
				byStatus[string(status)] = a
			}
			a.orders++
			if known && (!a.known || since < a.oldest) {
				a.oldest, a.known = since, true
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dwell of state file %s: %w", s.path, err)
	}
	// By numeric value: appendState writes canonical text only, but a
	// value of another writer may hold another form of the number.
	byValue := make(map[string]*StatusDwell, len(byStatus))
	for text, a := range byStatus {
		var v order.Decimal
		if text != "" {
			var err error
			if v, err = order.ParseDecimal(text); err != nil {
				return nil, newFileError(ErrCorrupt, err, "dwell of state file %s: status %q", s.path, text)
			}
		}
		d := byValue[v.Canonical()]
		if d == nil {
			d = &StatusDwell{Status: v}
			byValue[v.Canonical()] = d
		}
		d.Orders += a.orders
		if a.known && (d.Oldest.IsZero() || a.oldest < d.Oldest.UnixNano()) {
			d.Oldest = time.Unix(0, a.oldest).UTC()
		}
	}
	out := make([]StatusDwell, 0, len(byValue))
	for _, d := range byValue {
		out = append(out, *d)
	}
	slices.SortFunc(out, func(a, b StatusDwell) int { return a.Status.Cmp(b.Status) })
	return out, nil
}

// peekDwell reads the status text (canonical, aliasing v) and the time the
// order entered it (unix nanoseconds; known false when the value has no
// updatedAt and no statusSince) from a stored value, skipping the rest
// without decoding it: Dwell and ListOrders look at every order with it. It
// rejects a value that is cut short; decodeState checks everything else.
func peekDwell(v []byte) (status []byte, since int64, known bool, err error) {
	p := peeker{b: v, ok: true}
	ver, flags := p.byte(), p.byte()
	if !p.ok {
		return nil, 0, false, fmt.Errorf("%w: truncated", errStateValue)
	}
	if ver != stateVersion && ver != stateVersion1 || ver == stateVersion1 && flags&flagSince != 0 {
		return nil, 0, false, fmt.Errorf("%w: encoding version %d with flags %#x", errStateValue, ver, flags)
	}
	if (flags&lockMask)>>lockShift == lockText {
		p.text()
	}
	status = p.text()
	p.skipVarint() // typeId
	p.text()       // referrerId
	p.skipVarint() // plentyId
	p.text()       // ownerId
	p.text()       // locationId
	if flags&flagCreated != 0 {
		p.skipVarint()
		p.skipVarint()
		if flags&flagCreatedNanos != 0 {
			p.skipVarint()
		}
	}
	switch {
	case flags&flagSince != 0:
		if flags&flagUpdated != 0 {
			p.skipVarint()
			p.skipVarint()
			if flags&flagUpdatedNanos != 0 {
				p.skipVarint()
			}
		}
		since, known = p.unixNano(true), true
	case flags&flagUpdated != 0:
		since, known = p.unixNano(flags&flagUpdatedNanos != 0), true
	}
	if !p.ok {
		return nil, 0, false, fmt.Errorf("%w: truncated", errStateValue)
	}
	return status, since, known, nil
}

// peeker skips through a stored value; ok turns false for good when a read
// runs past the end.
type peeker struct {
	b  []byte
	ok bool
}

func (p *peeker) byte() byte {
	if len(p.b) == 0 {
		p.b, p.ok = nil, false
		return 0
	}
	c := p.b[0]
	p.b = p.b[1:]
	return c
}

func (p *peeker) skipVarint() {
	for i, c := range p.b {
		if c < 0x80 {
			p.b = p.b[i+1:]
			return
		}
	}
	p.b, p.ok = nil, false
}

func (p *peeker) text() []byte {
	n, w := binary.Uvarint(p.b)
	if w <= 0 || n > uint64(len(p.b)-w) {
		p.b, p.ok = nil, false
		return nil
	}
	t := p.b[w : w+int(n)]
	p.b = p.b[w+int(n):]
	return t
}

// unixNano reads a time (seconds, offset, nanoseconds when nanos) as unix
// nanoseconds (saturated beyond the years 1678-2262).
func (p *peeker) unixNano(nanos bool) int64 {
	sec, w := binary.Varint(p.b)
	if w <= 0 {
		p.b, p.ok = nil, false
		return 0
	}
	p.b = p.b[w:]
	p.skipVarint() // the offset
	var ns uint64
	if nanos {
		if ns, w = binary.Uvarint(p.b); w <= 0 {
			p.b, p.ok = nil, false
			return 0
		}
		p.b = p.b[w:]
	}
	const maxSec = math.MaxInt64/1_000_000_000 - 1
	switch {
	case sec > maxSec:
		return math.MaxInt64
	case sec < -maxSec:
		return math.MinInt64
	}
	return sec*1_000_000_000 + int64(ns%1_000_000_000)
}

// Listed is one order of a listing: its id and the snapshot's state, with
// State.StatusSince set (see diff.EnteredStatus).
type Listed struct {
	ID    int64
	State diff.State
}

// ListFilter selects the orders of ListOrders. The zero filter selects
// every order.
type ListFilter struct {
	// Status, when set, selects the orders in one status (by numeric
	// value: 5.1 is 5.10); a pointer to the zero Decimal selects the orders
	// without a status.
	Status *order.Decimal
	// EnteredBefore, when set, selects the orders that entered their status
	// before it (StatusSince strictly before): "in the status for longer
	// than d" is EnteredBefore = now - d.
	EnteredBefore time.Time
	// AfterID is the cursor: only orders with a greater id (0: from the
	// start).
	AfterID int64
}

// ListMax bounds the limit of one ListOrders call, and ListScanMax the
// orders one call examines: a read transaction stays short (tens of
// milliseconds) however rare the orders the filter selects.
const (
	ListMax     = 10000
	ListScanMax = 200000
)

// ListOrders returns up to limit orders that match f, by ascending id, in
// one read transaction. next is the cursor of the following page (pass it
// as AfterID), 0 when the listing is complete. A page may hold fewer than
// limit orders, even none, with a next cursor: a call examines at most
// ListScanMax orders. limit is capped at ListMax; below 1 it is ListMax.
func (s *Store) ListOrders(f ListFilter, limit int) (page []Listed, next int64, err error) {
	if limit < 1 || limit > ListMax {
		limit = ListMax
	}
	var want []byte
	if f.Status != nil {
		want = []byte(f.Status.Canonical()) // stored statuses are canonical
	}
	before := int64(0)
	if !f.EnteredBefore.IsZero() {
		before = f.EnteredBefore.UnixNano()
	}
	start := binary.BigEndian.AppendUint64(nil, uint64(max(f.AfterID, 0))+1) // ids are positive
	err = s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketOrders).Cursor()
		k, v := c.Seek(start)
		for examined := 0; k != nil; k, v = c.Next() {
			id := int64(binary.BigEndian.Uint64(k))
			if examined == ListScanMax {
				next = id - 1 // this one is not examined yet
				return nil
			}
			examined++
			status, since, known, err := peekDwell(v)
			if err != nil {
				return newFileError(ErrCorrupt, err, "state file %s: order %d", s.path, id)
			}
			if f.Status != nil && string(status) != string(want) || before != 0 && (!known || since >= before) {
				continue
			}
			var st diff.State
			if err := decodeState(v, &st); err != nil {
				return newFileError(ErrCorrupt, err, "state file %s: order %d", s.path, id)
			}
			page = append(page, Listed{ID: id, State: st})
			if len(page) == limit {
				if k2, _ := c.Next(); k2 != nil {
					next = id
				}
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("list the orders of state file %s: %w", s.path, err)
	}
	return page, next, nil
}
