package publisher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natstest "github.com/nats-io/nats-server/v2/test"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/state"
)

// testServer is an in-process NATS server with JetStream on a random port
// and a temporary store directory; restart keeps both.
type testServer struct {
	tb   testing.TB
	opts server.Options
	srv  *server.Server
	mu   sync.Mutex
}

// runServer starts a server from a copy of the default test options (the
// package variable is never modified); configure may change the copy.
func runServer(tb testing.TB, configure func(*server.Options)) *testServer {
	tb.Helper()
	opts := natstest.DefaultTestOptions
	opts.Port = -1
	opts.JetStream = true
	opts.StoreDir = tb.TempDir()
	if configure != nil {
		configure(&opts)
	}
	s := &testServer{tb: tb, opts: opts}
	s.start()
	// Pin the port so that a restart listens where the clients reconnect.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	tb.Cleanup(s.shutdown)
	return s
}

func (s *testServer) start() {
	s.tb.Helper()
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.tb.Fatalf("nats server: %v", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.tb.Fatal("nats server not ready")
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

func (s *testServer) shutdown() {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// restart starts the server again on the same port and store directory.
func (s *testServer) restart() {
	s.tb.Helper()
	s.shutdown()
	s.start()
}

func (s *testServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.opts.Port) }

// connect is publisher.Connect with fast reconnects.
func connect(tb testing.TB, url string, mod ...func(*publisher.ConnConfig)) *nats.Conn {
	tb.Helper()
	cfg := publisher.ConnConfig{URL: url, ReconnectWait: 20 * time.Millisecond, Logger: testLogger(tb)}
	for _, m := range mod {
		m(&cfg)
	}
	nc, err := publisher.Connect(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// plainConn is a client connection for checks (reading the stream).
func plainConn(tb testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return nc, js
}

// testLogger writes to the test log when -v is given, until the test ends:
// the NATS client calls its handlers (closed, disconnected) on a goroutine of
// its own, which may run after the test's last cleanup, and t.Log after a
// test completed panics.
func testLogger(tb testing.TB) *slog.Logger {
	if !testing.Verbose() {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(newTBWriter(tb), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// tbWriter writes to tb's log until tb's cleanups run, and drops what comes
// later. Register it before the connections whose handlers log, so that the
// log of their closing (cleanups run last in, first out) is still shown.
type tbWriter struct {
	tb    testing.TB
	mu    sync.Mutex
	ended bool
}

func newTBWriter(tb testing.TB) *tbWriter {
	w := &tbWriter{tb: tb}
	tb.Cleanup(func() {
		w.mu.Lock()
		w.ended = true
		w.mu.Unlock()
	})
	return w
}

func (w *tbWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.tb.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}

func openStore(tb testing.TB, sync bool) *state.Store {
	tb.Helper()
	s, err := state.Open(filepath.Join(tb.TempDir(), "state.db"), state.Options{NoSync: !sync})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// fixture is an order entry of plenty/testdata (the realistic shape).
var fixture = func() order.Order {
	body, err := os.ReadFile("../plenty/testdata/search-page.json")
	if err != nil {
		panic(err)
	}
	page, err := order.DecodePage(body)
	if err != nil {
		panic(err)
	}
	return page.Orders[1]
}()

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("", 3600))

// entry is the outbox entry of the step-th status change (step -> step+1)
// of order id: an encoded CloudEvent of about 1 KB under prefix "orders".
func entry(id int64, step int) state.OutboxEntry {
	raw, err := json.Marshal(map[string]any{
		"id": id, "referrerId": 4.01, "roundTotalsOnly": true, "numberOfDecimals": 2, "plentyId": 41523, "typeId": 1,
		"lockStatus": "unlocked", "locationId": "1", "createdAt": fixture.CreatedAt.String(),
		"updatedAt": t0.Add(time.Duration(step) * time.Second).Format(time.RFC3339), "statusId": step + 1, "ownerId": "3",
	})
	if err != nil {
		panic(err)
	}
	o, err := order.DecodeOrder(raw)
	if err != nil {
		panic(err)
	}
	after := diff.StateOf(o)
	before := after
	before.StatusID = order.DecimalFromInt(int64(step))
	before.UpdatedAt = order.Time{Time: t0.Add(time.Duration(step-1) * time.Second)}
	ev := diff.Event{Type: diff.StatusChanged, OrderID: id, Before: &before, After: after, Order: o.Raw}
	ev.ID = diff.EventID(id, ev.Type, before.StatusID.Canonical(), after.StatusID.Canonical(), before.UpdatedAt.Time, after.UpdatedAt.Time)
	return state.OutboxEntry{ID: ev.ID, Subject: ev.Subject("orders"), Payload: diff.Encode(nil, ev, "https://shop.example/rest")}
}

// entries returns orders x steps entries, step-major: every order's first
// change, then every order's second change, and so on.
func entries(firstID int64, orders, steps int) []state.OutboxEntry {
	out := make([]state.OutboxEntry, 0, orders*steps)
	for s := 1; s <= steps; s++ {
		out = append(out, stepEntries(firstID, orders, s)...)
	}
	return out
}

// stepEntries is the step-th change of orders firstID, firstID+1, ...
func stepEntries(firstID int64, orders, step int) []state.OutboxEntry {
	out := make([]state.OutboxEntry, orders)
	for i := range out {
		out[i] = entry(firstID+int64(i), step)
	}
	return out
}

// commit appends entries to the outbox, in pages of up to 250.
func commit(tb testing.TB, st *state.Store, es []state.OutboxEntry) {
	tb.Helper()
	for len(es) > 0 {
		n := min(len(es), 250)
		if err := st.Commit(state.Commit{Events: es[:n]}); err != nil {
			tb.Fatal(err)
		}
		es = es[n:]
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		<-tick.C
	}
}

// startRun runs p.Run in a goroutine; the returned stop cancels it and
// waits for it to return.
func startRun(tb testing.TB, p *publisher.Publisher) (stop func()) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("Run: %v", err)
				}
			case <-time.After(15 * time.Second):
				tb.Error("Run did not return after cancel")
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

// subscribeAll subscribes to every event subject with core NATS (it sees
// every message sent, duplicates included), buffering up to n.
func subscribeAll(tb testing.TB, url string, n int) <-chan *nats.Msg {
	tb.Helper()
	sub, _ := plainConn(tb, url)
	msgs := make(chan *nats.Msg, n)
	if _, err := sub.ChanSubscribe("orders.>", msgs); err != nil {
		tb.Fatal(err)
	}
	if err := sub.Flush(); err != nil {
		tb.Fatal(err)
	}
	return msgs
}

// stored is a message read back from the stream.
type stored struct {
	Seq     uint64
	Subject string
	MsgID   string
	Type    string
	Data    []byte
}

// readStream reads the whole stream with an ordered consumer.
func readStream(tb testing.TB, js jetstream.JetStream, stream string) []stored {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	total := int(info.State.Msgs)
	if total == 0 {
		return nil
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]stored, 0, total)
	for len(out) < total {
		batch, err := c.Fetch(min(total-len(out), 1000), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			tb.Fatal(err)
		}
		for m := range batch.Messages() {
			md, err := m.Metadata()
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, stored{Seq: md.Sequence.Stream, Subject: m.Subject(), MsgID: m.Headers().Get(jetstream.MsgIDHeader),
				Type: m.Headers().Get("Content-Type"), Data: m.Data()})
		}
		if err := batch.Error(); err != nil {
			tb.Fatal(err)
		}
		if ctx.Err() != nil {
			tb.Fatalf("read %d of %d messages", len(out), total)
		}
	}
	return out
}

// checkStream checks the stream against the entries: every entry exactly
// once, with its headers and payload, and the entries of each order in
// outbox order.
func checkStream(tb testing.TB, got []stored, want []state.OutboxEntry) {
	tb.Helper()
	byID := make(map[string]int, len(want))
	for i, e := range want {
		byID[e.ID] = i
	}
	seen := make(map[string]bool, len(got))
	lastOfOrder := map[string]int{}
	for _, m := range got {
		i, ok := byID[m.MsgID]
		if !ok {
			tb.Errorf("stream seq %d: unknown message id %q (%s)", m.Seq, m.MsgID, m.Subject)
			continue
		}
		if seen[m.MsgID] {
			tb.Errorf("stream seq %d: duplicate of %s (%s)", m.Seq, m.MsgID, m.Subject)
			continue
		}
		seen[m.MsgID] = true
		e := want[i]
		if m.Subject != e.Subject || !bytes.Equal(m.Data, e.Payload) || m.Type != diff.ContentType {
			tb.Errorf("stream seq %d: subject %s content type %q, want %s %q (payload equal: %v)", m.Seq, m.Subject, m.Type, e.Subject, diff.ContentType, bytes.Equal(m.Data, e.Payload))
		}
		key := e.Subject[bytes.LastIndexByte([]byte(e.Subject), '.')+1:]
		if prev, ok := lastOfOrder[key]; ok && prev > i {
			tb.Errorf("order %s: stream seq %d holds outbox entry #%d after entry #%d: order of the order's events broken", key, m.Seq, i, prev)
		}
		lastOfOrder[key] = i
	}
	if len(seen) != len(want) {
		tb.Errorf("stream holds %d of %d events (%d messages)", len(seen), len(want), len(got))
	}
}
