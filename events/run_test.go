package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/schemas"
	"github.com/orderwatch/orderwatch/state"
)

// clock is the fake clock of the simulator, the client and the poller.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	c.Advance(d)
	return ctx.Err()
}

// realRun runs the watcher's pipeline in process: the shop simulator (fake
// clock) over HTTP, the client, the poller with a state file, the
// publisher into a JetStream stream of an in-process NATS server. It
// records a shop silently (the first sync), then makes every kind of
// change, sweeps and publishes. It returns the stream's messages.
func realRun(t *testing.T) (msgs []jetstream.Msg, js jetstream.JetStream) {
	t.Helper()
	t0 := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	clk := &clock{t: t0}
	sim := plentysim.New(plentysim.Config{Now: clk.Now, Seed: 25})
	sim.Generate(60, t0.Add(-10*24*time.Hour), t0.Add(-time.Hour))
	srv := newHTTPServer(t, sim)

	st, err := state.Open(filepath.Join(t.TempDir(), "state.db"), state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	client, err := plenty.New(plenty.Config{
		BaseURL: srv, Username: "demo", Password: "demo", Tokens: st, Now: clk.Now,
		Pacer: plenty.NewPacer(plenty.PacerConfig{Reserve: 1, Now: clk.Now, Sleep: clk.Sleep}),
		Retry: plenty.RetryConfig{Initial: time.Millisecond, Max: 5 * time.Millisecond, MaxElapsed: 2 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	poll, err := poller.New(client, st, poller.Config{
		StartFrom: t0.Add(-30 * 24 * time.Hour), Settle: 5 * time.Second, Overlap: 30 * time.Second,
		With: []string{"addresses", "amounts", "payments"}, EmitUpdated: true,
		Source: "https://shop.example/rest", SubjectPrefix: "orders", Now: clk.Now, Sleep: clk.Sleep,
	})
	if err != nil {
		t.Fatal(err)
	}

	ns := testnats.Start(t)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	pub, err := publisher.New(nc, st, publisher.Config{Stream: "ORDERS", CreateStream: true, SubjectPrefix: "orders", DuplicateWindow: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pub.EnsureStream(ctx); err != nil {
		t.Fatal(err)
	}
	sweep := func() {
		t.Helper()
		clk.Advance(10 * time.Second)
		if _, err := poll.Sweep(ctx); err != nil {
			t.Fatalf("sweep: %v", err)
		}
		if err := pub.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	sweep() // the first sync: silent

	// An order first seen now but created before the baseline point:
	// discovered. Then changes of every kind, decimal statuses among them.
	clk.Advance(time.Second)
	sim.AddOrder(plentysim.Order{StatusID: "5.1", CreatedAt: t0.Add(-48 * time.Hour), UpdatedAt: clk.Now()})
	olds := sim.Orders()
	mustSet := func(_ plentysim.Order, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustSet(sim.SetStatus(olds[0].ID, "5.1"))
	mustSet(sim.SetStatus(olds[1].ID, "7.01"))
	mustSet(sim.SetLock(olds[2].ID, plentysim.LockPermanent))
	mustSet(sim.Touch(olds[3].ID))
	sweep()
	mustSet(sim.SetStatus(olds[0].ID, "6"))
	sim.MutateRandom(40)
	sweep()

	js, err = jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := int(info.State.Msgs)
	batch, err := cons.FetchNoWait(n)
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	if len(msgs) != n {
		t.Fatalf("read %d of the stream's %d messages: %v", len(msgs), n, batch.Error())
	}
	return msgs, js
}

// TestRealRunEventsDecode: every event a real run stores in the stream
// decodes into the types, re-encodes to the same JSON value, passes the
// schema again, and its NATS subject is the one Prefix.Of builds and Parse
// reads back.
func TestRealRunEventsDecode(t *testing.T) {
	msgs, js := realRun(t)
	seen := map[events.Type]int{}
	var labels, decimalSubject bool
	for _, m := range msgs {
		ev, err := events.FromMsg(m)
		if err != nil {
			t.Fatalf("%s: %v\n%s", m.Subject(), err, m.Data())
		}
		seen[ev.Type]++
		labels = labels || ev.Data.Labels != nil
		sameJSON(t, m.Data(), ev)
		if got := events.DefaultPrefix.Of(ev); got != m.Subject() {
			t.Errorf("Prefix.Of = %q, the message's subject is %q", got, m.Subject())
		}
		sub, err := events.DefaultPrefix.Parse(m.Subject())
		if err != nil {
			t.Fatal(err)
		}
		if sub.Type != ev.Type || sub.OrderID != ev.OrderID() {
			t.Errorf("Parse(%q) = %+v, the event is %s of %d", m.Subject(), sub, ev.Type, ev.OrderID())
		}
		if ev.Type == events.StatusChanged {
			if !sub.From.Equal(ev.Data.Before.StatusID) || !sub.To.Equal(ev.Data.After.StatusID) {
				t.Errorf("Parse(%q) = %s -> %s, the event %s -> %s", m.Subject(), sub.From, sub.To, ev.Data.Before.StatusID, ev.Data.After.StatusID)
			}
			decimalSubject = decimalSubject || bytes.Contains([]byte(m.Subject()), []byte("_"))
		}
	}
	checkFilters(t, js, msgs)
	for _, typ := range events.Types {
		if seen[typ] == 0 {
			t.Errorf("the run produced no %s (%v)", typ, seen)
		}
	}
	if !labels || !decimalSubject {
		t.Errorf("the run had no event with labels (%v) or no decimal status in a subject (%v)", labels, decimalSubject)
	}
	t.Logf("%d events: %v", len(msgs), seen)
}

// sameJSON re-encodes ev, checks it against the schema and compares it with
// the original message as JSON values (numbers as text).
func sameJSON(t *testing.T, orig []byte, ev events.Event) {
	t.Helper()
	re, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := schemas.Validate(re); err != nil {
		t.Errorf("re-encoded event %s does not validate: %v\n%s", ev.ID, err, re)
	}
	a, b := jsonValue(t, orig), jsonValue(t, re)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("event %s changed in a decode and encode:\n%s\n%s", ev.ID, orig, re)
	}
}

func jsonValue(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// checkFilters: consumers on the run's stream with the filters Prefix
// builds get exactly the events the filters name.
func checkFilters(t *testing.T, js jetstream.JetStream, msgs []jetstream.Msg) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var all []events.Event
	for _, m := range msgs {
		ev, err := events.FromMsg(m)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, ev)
	}
	// The order with the most events, a status change among them.
	count := map[int64]int{}
	var some events.Event
	for _, ev := range all {
		if count[ev.OrderID()]++; ev.Type == events.StatusChanged && count[ev.OrderID()] > count[some.OrderID()] {
			some = ev
		}
	}
	p := events.DefaultPrefix
	for _, tc := range []struct {
		filters []string
		want    func(events.Event) bool
	}{
		{[]string{p.Into("5.1")}, func(e events.Event) bool { return e.Type == events.StatusChanged && e.Data.After.StatusID.Equal("5.1") }},
		{[]string{p.OutOf("5.1")}, func(e events.Event) bool {
			return e.Type == events.StatusChanged && e.Data.Before.StatusID.Equal("5.1")
		}},
		{p.Order(some.OrderID()), func(e events.Event) bool { return e.OrderID() == some.OrderID() }},
		{[]string{p.Type(events.Created), p.Type(events.Discovered)}, events.Event.FirstSight},
	} {
		var want []string
		for _, ev := range all {
			if tc.want(ev) {
				want = append(want, ev.ID)
			}
		}
		if len(want) == 0 {
			t.Fatalf("%v: the run has no such event", tc.filters)
		}
		stream, err := js.Stream(ctx, "ORDERS")
		if err != nil {
			t.Fatal(err)
		}
		cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: tc.filters})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for len(got) < len(want) {
			m, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
			if err != nil {
				t.Fatalf("%v: %v after %d of %d events", tc.filters, err, len(got), len(want))
			}
			ev, err := events.FromMsg(m)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ev.ID)
		}
		if info, err := cons.Info(ctx); err != nil || info.NumPending != 0 {
			t.Errorf("%v: %d more events than named (%v)", tc.filters, info.NumPending, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%v delivered %v, want %v", tc.filters, got, want)
		}
	}
}
