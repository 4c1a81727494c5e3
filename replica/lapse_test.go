package replica_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
)

// TestGateClosesBeforeTheLeaseKeyLapses: the active is cut off from NATS
// (no renewal, no release) and runs on; its lease key lapses on the
// server (the expiry's marker, which every watcher sees as "no holder").
// The gate, asked before every call to the shop, must be closed before
// that instant: the deadline it enforces (the wall-clock form of its
// monotonic deadline, read while it is open) comes before the server's
// stamp of the marker. So a call the shop receives while the key names
// no holder (seen once by TestTakeoverChaos's judge, under load) passed
// the gate before the key lapsed and arrived late (its travel from the
// gate to the shop's handler): a call in flight, not a second holder.
func TestGateClosesBeforeTheLeaseKeyLapses(t *testing.T) {
	g := newGroup(t)
	if f, err := lease.Server(context.Background(), g.js); err != nil || !f.LimitMarkers {
		t.Skipf("the server writes no expiry marker (NATS before 2.11: %+v, %v): nothing to judge the gate against", f, err)
	}
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	kv, err := g.js.KeyValue(context.Background(), g.bucket+"_lease")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	wt, err := kv.Watch(ctx, g.key, jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = wt.Stop() }()

	var renewed, lapsed time.Time // the server's stamps of a's last renewal and of the marker
	note := func() bool {
		select {
		case e, ok := <-wt.Updates():
			if !ok {
				t.Fatal("the watch ended")
			}
			switch {
			case e == nil:
			case e.Operation() == jetstream.KeyValuePut:
				renewed = e.Created()
			default:
				lapsed = e.Created()
			}
		case <-ctx.Done():
			t.Fatal("the lease key did not lapse")
		}
		return true
	}
	for renewed.IsZero() && note() {
	}
	a.nc.Close() // no renewal, no release: a runs on until its deadline
	var deadline time.Time
	for a.rep.Gate() == nil {
		if d := a.rep.Report().Deadline; d.After(deadline) {
			deadline = d
		}
		time.Sleep(time.Millisecond)
	}
	if deadline.IsZero() {
		t.Fatal("the gate closed before its deadline could be read")
	}
	for lapsed.IsZero() && note() {
	}
	// The server may expire the key as soon as a TTL after it stamped
	// the last renewal (the marker itself comes later, at its own pace).
	if expires := renewed.Add(ttl); !deadline.Before(expires) {
		t.Errorf("a's gate was open until %s, its key may expire at %s (server: its last renewal %s plus the TTL): a second holder could call while the first still may",
			deadline.Format("15:04:05.000"), expires.Format("15:04:05.000"), renewed.Format("15:04:05.000"))
	}
	t.Logf("a's gate closed %v before its lease key could expire (%v before the marker)", renewed.Add(ttl).Sub(deadline), lapsed.Sub(deadline))
}
