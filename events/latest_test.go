package events_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/plenty/order"
)

// sweepEvents is what the watcher publishes for one entry of a sweep,
// given the order's previous state: diff.Decide and diff.Encode, decoded.
func sweepEvents(t *testing.T, prev *diff.State, entry string) (diff.State, []events.Event) {
	t.Helper()
	o, err := order.DecodeOrder(json.RawMessage(entry))
	if err != nil {
		t.Fatal(err)
	}
	next, _, evs := diff.Decide(prev, o, diff.Options{Baseline: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)})
	var out []events.Event
	for _, e := range evs {
		ev, err := events.Unmarshal(diff.Encode(nil, e, "https://shop.example"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return next, out
}

func entryJSON(status, lock, updatedAt string) string {
	r := strings.NewReplacer("STATUS", status, "LOCK", lock, "UPDATED", updatedAt)
	return r.Replace(`{"id":2302,"referrerId":4.01,"plentyId":41523,"typeId":1,"lockStatus":"LOCK","locationId":"1",` +
		`"createdAt":"2026-11-20T11:40:17+01:00","updatedAt":"UPDATED","statusId":STATUS,"ownerId":"3"}`)
}

// TestLatestKeepsTheSameSweepPair: a sweep that sees an order's status and
// lock change publishes two events with the same before, after and
// updatedAt. A consumer that keeps Latest per order applies both; it drops
// a redelivered copy and an older event that arrives late, and applies the
// next change.
func TestLatestKeepsTheSameSweepPair(t *testing.T) {
	prev, first := sweepEvents(t, nil, entryJSON("5", "unlocked", "2026-11-22T09:58:02+01:00"))
	prev, pair := sweepEvents(t, &prev, entryJSON("6", "permanentlyLocked", "2026-11-22T10:02:41+01:00"))
	_, later := sweepEvents(t, &prev, entryJSON("7", "permanentlyLocked", "2026-11-22T10:07:00+01:00"))
	if len(first) != 1 || len(pair) != 2 || len(later) != 1 ||
		pair[0].Type != events.StatusChanged || pair[1].Type != events.LockChanged ||
		!pair[0].Data.After.UpdatedAt.Equal(pair[1].Data.After.UpdatedAt) {
		t.Fatalf("the sweeps published %v, %v, %v; want one, a status and a lock change with one updatedAt, one", first, pair, later)
	}
	stored := events.LatestOf(first[0].Data.After) // e.g. from GET /state/orders
	var applied []string
	deliver := func(ev events.Event) {
		if stored.Newer(ev) {
			applied = append(applied, string(ev.Type))
			stored = stored.Add(ev)
		}
	}
	for _, ev := range []events.Event{first[0], pair[0], pair[1], pair[0], later[0], pair[1], first[0]} {
		deliver(ev)
	}
	want := "order.created order.status_changed order.lock_changed order.status_changed"
	if got := strings.Join(applied, " "); got != want {
		t.Errorf("applied %s, want %s (the pair both, no copy, nothing older)", got, want)
	}
	if !stored.UpdatedAt.Equal(later[0].Data.After.UpdatedAt) || len(stored.IDs) != 1 {
		t.Errorf("stored %+v", stored)
	}
}

// TestLatestPairInEitherOrder: the same-sweep pair arrives lock change
// first, each event twice, and an event of the sweep before last: both of
// the pair are applied once, the older one not.
func TestLatestPairInEitherOrder(t *testing.T) {
	prev, first := sweepEvents(t, nil, entryJSON("5", "unlocked", "2026-11-22T09:58:02+01:00"))
	_, pair := sweepEvents(t, &prev, entryJSON("6", "permanentlyLocked", "2026-11-22T10:02:41+01:00"))
	stored := events.LatestOf(first[0].Data.After)
	var applied []string
	for _, ev := range []events.Event{pair[1], pair[1], first[0], pair[0], pair[0], pair[1]} {
		if stored.Newer(ev) {
			applied = append(applied, string(ev.Type))
			stored = stored.Add(ev)
		}
	}
	if got := strings.Join(applied, " "); got != "order.lock_changed order.status_changed" {
		t.Errorf("applied %s, want the lock change and the status change once each", got)
	}
}

// TestLatestSameSecondLimit is the limit Newer documents: an order seen
// in two states by two sweeps within one second of the shop's clock (the
// same updatedAt) whose older event arrives after the newer one; the
// older one counts as newer.
func TestLatestSameSecondLimit(t *testing.T) {
	prev, _ := sweepEvents(t, nil, entryJSON("5", "unlocked", "2026-11-22T09:58:02+01:00"))
	prev, a := sweepEvents(t, &prev, entryJSON("6", "unlocked", "2026-11-22T10:02:41+01:00"))
	_, b := sweepEvents(t, &prev, entryJSON("7", "unlocked", "2026-11-22T10:02:41+01:00"))
	stored := events.Latest{}.Add(b[0])
	if !stored.Newer(a[0]) {
		t.Error("the older event of one second is not taken as newer: update Newer's documentation and docs/consuming.md")
	}
}
