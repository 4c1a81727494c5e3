package mirror_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/mirror"
	"github.com/orderwatch/orderwatch/shopid"
	"github.com/orderwatch/orderwatch/state"
)

// TestMirrorTakesOnlyItsShopsEvents: two shops whose watchers share one
// stream and its subjects (the defaults ORDERS and orders.>, as two
// deployments with default settings have them). Order ids are the shops'
// own, so both have an order 7. Shop b's standby must mirror only b's
// events: it copied a's, and after a takeover b published status_changed
// for its order 7 with a's status as before. Events carry the shop in the
// Orderwatch-Shop header; events from before the header are told apart by
// their CloudEvents source.
func TestMirrorTakesOnlyItsShopsEvents(t *testing.T) {
	s := runServer(t)
	ctx := context.Background()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	t0 := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	publish := func(shop, source string, id int64, status string, at time.Time) {
		t.Helper()
		ev := diff.Event{Type: diff.Created, OrderID: id, After: orderState(status, at), Order: []byte(fmt.Sprintf(`{"id":%d}`, id))}
		ev.ID = fmt.Sprintf("%s-%d-%d", shop+source, id, at.Unix())
		msg := &nats.Msg{Subject: fmt.Sprintf("orders.created.%d", id), Data: diff.Encode(nil, ev, source), Header: nats.Header{}}
		if shop != "" {
			msg.Header.Set(shopid.Header, shop)
		}
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	// Before shop ids: no header, the source tells.
	publish("", "https://a.example", 7, "3", t0.Add(time.Minute))
	publish("", "https://b.example", 7, "5", t0)
	publish("", "https://b.example", 8, "5", t0)
	// Since: the header.
	publish("shop-a", "https://a.example", 7, "9", t0.Add(2*time.Minute))
	publish("shop-a", "https://a.example", 9, "9", t0.Add(2*time.Minute))
	publish("shop-b", "https://b.example", 8, "6", t0.Add(time.Minute))

	m, st := shopBStandby(t, js)
	if err := m.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	if m.Seq() != 6 {
		t.Errorf("mirrored up to %d, want 6 (the other shop's events are read past, not applied)", m.Seq())
	}
	for _, c := range []struct {
		id     int64
		status string // "" not tracked
	}{{7, "5"}, {8, "6"}, {9, ""}} {
		got := lookup(t, st, c.id)
		switch {
		case c.status == "" && got != nil:
			t.Errorf("shop b's standby tracks shop a's order %d: %+v", c.id, got)
		case c.status != "" && (got == nil || got.StatusID.String() != c.status):
			t.Errorf("shop b's order %d = %+v, want status %s (shop a's events not applied)", c.id, got, c.status)
		}
	}
}

// shopBStandby is shop b's standby on the stream ORDERS (subjects
// orders.>, shared with shop a), without dumps: its mirror and state file.
func shopBStandby(t *testing.T, js jetstream.JetStream) (*mirror.Mirror, *state.Store) {
	t.Helper()
	st, err := state.Open(filepath.Join(t.TempDir(), "b.db"), state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ckv, err := lease.CheckpointBucket(context.Background(), js, "t_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	key := lease.Key("shop-b", "ORDERS")
	m, err := mirror.New(mirror.Config{JS: js, Stream: "ORDERS", SubjectPrefix: "orders", Store: st,
		Checkpoints: lease.NewCheckpoints(ckv, key), Key: key, Shop: "shop-b", Source: "https://b.example"})
	if err != nil {
		t.Fatal(err)
	}
	return m, st
}
