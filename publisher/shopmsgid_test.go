package publisher_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/shopid"
	"github.com/orderwatch/orderwatch/state"
)

// sharedStream creates the stream ORDERS (subjects orders.>) owned by a
// fleet, as a fleet member creates it for its shops.
func sharedStream(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.>"}, Duplicates: 10 * time.Minute,
		Metadata: map[string]string{publisher.MetaShop: "fleet test"},
	}); err != nil {
		t.Fatal(err)
	}
}

// ofShop is e under the shop's subject prefix orders.<shop>.
func ofShop(e state.OutboxEntry, shop string) state.OutboxEntry {
	e.Subject = "orders." + shop + strings.TrimPrefix(e.Subject, "orders")
	return e
}

// TestSharedStreamSameEventTwoShops: two shops publishing into one stream
// the same transition of the same order id in the same second (the same
// event id) both get their event stored: the Nats-Msg-Id names the shop,
// the event id the consumers see does not change. With the event id alone
// as the Nats-Msg-Id the stream dropped the second shop's event as a
// duplicate.
func TestSharedStreamSameEventTwoShops(t *testing.T) {
	srv := runServer(t, nil)
	nc := connect(t, srv.url())
	_, js := plainConn(t, srv.url())
	sharedStream(t, js)
	e := entry(4711, 1)
	for _, shop := range []string{"shop-a", "shop-b"} {
		st := openStore(t, false)
		commit(t, st, []state.OutboxEntry{ofShop(e, shop)})
		p, err := publisher.New(nc, st, publisher.Config{
			Stream: "ORDERS", SubjectPrefix: "orders." + shop, Shop: shop, StreamOwner: "fleet test", Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		stop := startRun(t, p)
		waitFor(t, 20*time.Second, shop+"'s outbox drained", func() bool { return st.OutboxDepth() == 0 })
		stop()
	}
	got := readStream(t, js, "ORDERS")
	if len(got) != 2 {
		t.Fatalf("the stream holds %d events, want 2 (one per shop): %v", len(got), msgIDs(got))
	}
	for _, m := range got {
		shop := strings.Split(m.Subject, ".")[1]
		if want := events.MsgID(shop, e.ID); m.MsgID != want {
			t.Errorf("%s: Nats-Msg-Id %q, want %q", m.Subject, m.MsgID, want)
		}
		h := nats.Header{jetstream.MsgIDHeader: {m.MsgID}, "Content-Type": {m.Type}, shopid.Header: {shop}}
		ev, err := events.Decode(h, m.Data)
		if err != nil {
			t.Errorf("%s: a consumer cannot decode it: %v", m.Subject, err)
		} else if ev.ID != e.ID {
			t.Errorf("%s: the event id the consumer sees is %q, want %q", m.Subject, ev.ID, e.ID)
		}
	}
}

// TestUpgradeEventInFlightNotSentTwice: an event an earlier version
// published with the event id alone as its Nats-Msg-Id, still in the
// outbox at the upgrade (its acknowledgement lost), is found in the stream
// and not stored again under the shop's Nats-Msg-Id.
func TestUpgradeEventInFlightNotSentTwice(t *testing.T) {
	srv := runServer(t, nil)
	nc := connect(t, srv.url())
	_, js := plainConn(t, srv.url())
	sharedStream(t, js)
	e := ofShop(entry(4711, 1), "shop-a")
	st := openStore(t, false)
	commit(t, st, []state.OutboxEntry{e})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// As the earlier version sent it; no send mark in the state file, so
	// the entry counts as possibly sent.
	if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: e.Subject, Data: e.Payload,
		Header: nats.Header{jetstream.MsgIDHeader: {e.ID}, "Content-Type": {events.ContentType}}}); err != nil {
		t.Fatal(err)
	}
	p, err := publisher.New(nc, st, publisher.Config{
		Stream: "ORDERS", SubjectPrefix: "orders.shop-a", Shop: "shop-a", StreamOwner: "fleet test", Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := startRun(t, p)
	waitFor(t, 20*time.Second, "the outbox drained", func() bool { return st.OutboxDepth() == 0 })
	stop()
	if got := readStream(t, js, "ORDERS"); len(got) != 1 {
		t.Fatalf("the stream holds %d copies of the event, want 1: %v", len(got), msgIDs(got))
	}
}

func msgIDs(ms []stored) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.MsgID
	}
	return out
}
