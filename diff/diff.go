// Package diff holds the pure decisions of orderwatch: given the previous
// tracked state of an order (or none) and the entry the service returned, what
// is stored in the snapshot and which change events are emitted. It also
// renders those events: NATS subjects and the CloudEvents JSON payload.
//
// Nothing in this package does I/O or reads a clock.
package diff

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// State is the tracked state of an order: what the snapshot keeps and what an
// event carries as before/after.
type State struct {
	StatusID   order.Decimal
	LockStatus string
	TypeID     int64
	ReferrerID order.Decimal
	PlentyID   int64
	OwnerID    order.FlexString
	LocationID order.FlexString
	CreatedAt  order.Time
	UpdatedAt  order.Time
}

// StateOf returns the tracked state of an entry.
func StateOf(o order.Order) State {
	return State{
		StatusID:   o.StatusID,
		LockStatus: o.LockStatus,
		TypeID:     o.TypeID,
		ReferrerID: o.ReferrerID,
		PlentyID:   o.PlentyID,
		OwnerID:    o.OwnerID,
		LocationID: o.LocationID,
		CreatedAt:  o.CreatedAt,
		UpdatedAt:  o.UpdatedAt,
	}
}

// Same reports whether two states hold the same tracked values: decimals by
// numeric value, times by instant and rendered offset. A stored state that is
// Same as the entry's needs no write.
func (s State) Same(o State) bool {
	return s.StatusID.Equal(o.StatusID) &&
		s.LockStatus == o.LockStatus &&
		s.TypeID == o.TypeID &&
		s.ReferrerID.Equal(o.ReferrerID) &&
		s.PlentyID == o.PlentyID &&
		s.OwnerID == o.OwnerID &&
		s.LocationID == o.LocationID &&
		sameTime(s.CreatedAt, o.CreatedAt) &&
		sameTime(s.UpdatedAt, o.UpdatedAt)
}

// sameTime: same instant and same offset in minutes (what RFC 3339 renders).
func sameTime(a, b order.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	if !a.Equal(b.Time) {
		return false
	}
	_, ao := a.Zone()
	_, bo := b.Zone()
	return ao/60 == bo/60
}

// Type is an event type, the CloudEvents "type" attribute.
type Type string

// The event types; see DESIGN.md "Events".
const (
	Created       Type = "order.created"
	StatusChanged Type = "order.status_changed"
	LockChanged   Type = "order.lock_changed"
	Discovered    Type = "order.discovered"
	Updated       Type = "order.updated"
)

// Event is one change of one order.
type Event struct {
	ID      string // deterministic (see EventID); also the Nats-Msg-Id
	Type    Type
	OrderID int64
	Before  *State          // nil on first sight
	After   State           // the state the entry carries
	Order   json.RawMessage // the entry exactly as the service returned it
}

// Options are the parts of the configuration and of the sweep that a decision
// depends on.
type Options struct {
	// Baseline is the upper bound hi of the very first sweep (kept in the
	// state file). An order first seen later is order.created when it was
	// created after Baseline, order.discovered otherwise. A zero Baseline
	// (unknown) makes every first sight order.discovered.
	Baseline time.Time
	// InBaseline says the page belongs to the baseline sweep (the first sync).
	InBaseline bool
	// EmitBaseline (WATCHER_BASELINE_EVENTS) emits events for orders recorded
	// by the baseline sweep; they are silent otherwise.
	EmitBaseline bool
	// EmitUpdated emits the opt-in order.updated when updatedAt advances.
	EmitUpdated bool
	// Scope is the part of the scope evaluated here (see SplitScope); nil
	// holds every order. A change is published when the order is in scope
	// before or after it, so subscribers see an order leave the scope and
	// come back. An order never seen in scope is not stored; one that was
	// is tracked on, so that its return is seen with its true before.
	Scope *Scope
}

// Decide is the whole decision for one entry o, given prev, the snapshot's
// state of the order (nil when the order was never seen).
//
// next is the state the snapshot holds afterwards; store says whether it must
// be written. An entry older than the snapshot (updatedAt strictly before it)
// is stale: it changes nothing (next == *prev, store false, no events), so the
// snapshot never regresses. Events come in a fixed order: created or
// discovered, or else status_changed, lock_changed, updated.
//
// With opt.Scope, an order out of scope that was never stored stays out of
// the snapshot (nothing is stored, no event); a stored order is updated
// whatever its scope, and its changes are published when it is in scope
// before or after them.
func Decide(prev *State, o order.Order, opt Options) (next State, store bool, events []Event) {
	next = StateOf(o)
	if prev == nil {
		if !opt.Scope.Match(o.ID, &next) {
			return next, false, nil
		}
		if opt.InBaseline && !opt.EmitBaseline {
			return next, true, nil
		}
		typ := Discovered
		if !opt.Baseline.IsZero() && !o.CreatedAt.IsZero() && o.CreatedAt.After(opt.Baseline) {
			typ = Created
		}
		ev := Event{Type: typ, OrderID: o.ID, After: next, Order: o.Raw}
		ev.ID = EventID(o.ID, typ, "", next.StatusID.Canonical(), time.Time{}, next.UpdatedAt.Time)
		return next, true, []Event{ev}
	}
	if next.UpdatedAt.Before(prev.UpdatedAt.Time) {
		return *prev, false, nil
	}
	if next.Same(*prev) {
		return next, false, nil
	}
	// Something differs: the snapshot takes the entry's state.
	statusChanged := !prev.StatusID.Equal(next.StatusID)
	lockChanged := prev.LockStatus != next.LockStatus
	updated := opt.EmitUpdated && next.UpdatedAt.After(prev.UpdatedAt.Time)
	if !statusChanged && !lockChanged && !updated {
		return next, true, nil
	}
	if opt.Scope != nil && !opt.Scope.Match(o.ID, prev) && !opt.Scope.Match(o.ID, &next) {
		return next, true, nil // out of scope on both sides: tracked, silent
	}
	before := new(State)
	*before = *prev
	events = make([]Event, 0, 3)
	add := func(typ Type, from, to string) {
		events = append(events, Event{
			ID:      EventID(o.ID, typ, from, to, before.UpdatedAt.Time, next.UpdatedAt.Time),
			Type:    typ,
			OrderID: o.ID,
			Before:  before,
			After:   next,
			Order:   o.Raw,
		})
	}
	if statusChanged {
		add(StatusChanged, prev.StatusID.Canonical(), next.StatusID.Canonical())
	}
	if lockChanged {
		add(LockChanged, prev.LockStatus, next.LockStatus)
	}
	if updated {
		add(Updated, idTime(prev.UpdatedAt), idTime(next.UpdatedAt))
	}
	return next, true, events
}

// idTime renders an updatedAt for an event id: UTC with every fraction digit,
// "" for the zero time.
func idTime(t order.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// IDScheme is the version of the event id scheme (see EventID). Version 1
// hashed (order id, type, before value, after value, after.updatedAt in
// whole seconds): 5 -> 6, 6 -> 5, 5 -> 6 within one second gave the third
// the first's id, and JetStream dropped it as a duplicate. Version 2 adds
// before.updatedAt and keeps both timestamps to the nanosecond. Ids are
// stored with their outbox entries, so entries written by an older version
// are re-sent with the ids they were written with.
const IDScheme = 2

// idDomain separates these hashes from any other use of SHA-256 over similar
// bytes and carries the id scheme's version.
const idDomain = "orderwatch.event.v2"

// EventID is the deterministic id of an event: the first 16 bytes of SHA-256,
// in hex (32 characters), over an unambiguous encoding of the order id, the
// type, the before and after values, before.updatedAt and after.updatedAt
// (each as "absent" or UTC unix seconds and nanoseconds). The values are what
// the event is about: the canonical status text for status_changed, the lock
// text for lock_changed, the previous and next updatedAt for updated, "" and
// the status for created and discovered (whose before.updatedAt is absent).
//
// Two transitions of one order differ in a value or in one of the two
// timestamps unless the order was seen in more than three states within one
// second of the service's clock (its resolution); the same transition gives
// the same id in every process, which lets JetStream drop a re-sent
// duplicate. Every variable-length field is length-prefixed, so no two
// different inputs encode to the same bytes.
func EventID(orderID int64, typ Type, before, after string, beforeAt, afterAt time.Time) string {
	var stack [192]byte
	b := append(stack[:0], idDomain...)
	b = binary.BigEndian.AppendUint64(b, uint64(orderID))
	b = appendLP(b, string(typ))
	b = appendLP(b, before)
	b = appendLP(b, after)
	b = appendIDTime(b, beforeAt)
	b = appendIDTime(b, afterAt)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// appendIDTime writes 0 for the zero time, else 1, unix seconds and nanoseconds.
func appendIDTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.BigEndian.AppendUint64(b, uint64(t.Unix()))
	return binary.BigEndian.AppendUint32(b, uint32(t.Nanosecond()))
}

func appendLP(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
