package events

import (
	"slices"
	"time"
)

// Latest is what a consumer keeps per order to tell a change it has not
// applied yet from one it has: the data.after.updatedAt of the latest
// state it applied and the ids of the events it applied at that
// updatedAt. Comparing updatedAt alone is not enough: one sweep that sees
// a status change and a lock change of an order publishes two events with
// the same before, after and updatedAt (and different ids), and dropping
// an event whose updatedAt is not newer than the stored one drops the
// second of them.
//
// Keep it next to the order's state, in the same write. It is small: the
// ids of one updatedAt are at most the event types of one change.
type Latest struct {
	UpdatedAt time.Time `json:"updatedAt"`
	IDs       []string  `json:"ids,omitempty"`
}

// LatestOf is the Latest of a state read elsewhere (GET /state/orders,
// an earlier event's data.after) with no event applied yet: an event with
// the same updatedAt counts as newer, and applying it again is harmless
// (its after is that state).
func LatestOf(s State) Latest { return Latest{UpdatedAt: s.UpdatedAt} }

// Newer reports whether e is a change not applied yet: its
// data.after.updatedAt is later than l's, or the same and its id is not
// among l's ids. An event older than l (a redelivery that arrives after a
// later event of the order, with MaxAckPending above 1; a replay) is not
// newer, nor is a second copy of an event applied.
//
// The one case it cannot tell: an older event with the same updatedAt as
// a newer one, which needs an order observed in two states by different
// sweeps within one second of the shop's clock (a write whose updatedAt
// lags its visibility by more than WATCHER_SETTLE, docs/how-it-works.md,
// "Event ids") and the older event delivered after the newer one: it is
// taken as newer.
func (l Latest) Newer(e Event) bool {
	at := e.Data.After.UpdatedAt
	switch {
	case at.After(l.UpdatedAt):
		return true
	case at.Before(l.UpdatedAt):
		return false
	}
	return !slices.Contains(l.IDs, e.ID)
}

// Add is l after e is applied: e's updatedAt with e's id, or the ids at
// that updatedAt with e's added. An event that is not Newer leaves l as it
// is.
func (l Latest) Add(e Event) Latest {
	if !l.Newer(e) {
		return l
	}
	at := e.Data.After.UpdatedAt
	if at.Equal(l.UpdatedAt) {
		return Latest{UpdatedAt: l.UpdatedAt, IDs: append(slices.Clip(l.IDs), e.ID)}
	}
	return Latest{UpdatedAt: at, IDs: []string{e.ID}}
}
