package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/events"
	"github.com/orderwatch/orderwatch/examples/internal/fixture"
)

// webhook is a chat webhook that fails its first failFirst posts.
type webhook struct {
	mu        sync.Mutex
	failFirst int
	calls     int
	lines     []string
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.calls++
	if w.calls <= w.failFirst {
		http.Error(rw, "busy", http.StatusServiceUnavailable)
		return
	}
	var body struct{ Text string }
	b, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(b, &body); err != nil || r.Header.Get("Content-Type") != "application/json" {
		http.Error(rw, "bad body", http.StatusBadRequest)
		return
	}
	w.lines = append(w.lines, body.Text)
}

func (w *webhook) result() (calls int, lines []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls, slices.Clone(w.lines)
}

// runUntilAcked runs the alert until it has acknowledged n events.
func runUntilAcked(t *testing.T, args []string, n int) {
	t.Helper()
	c, err := parse(args, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stop, stopped := context.WithCancel(ctx)
	defer stopped()
	acked := 0
	c.acked = func(events.Event) {
		if acked++; acked == n {
			stopped()
		}
	}
	if err := alert(stop, c, io.Discard); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("acknowledged %d of %d events", acked, n)
	}
}

// TestAlertOncePerOrderEnteringTheStatus: orders entering status 6 (a
// change into it, a new order in it) are posted, one line each; the
// webhook's failures are retried; an event the stream holds twice and a
// replay by another consumer post nothing again; changes into other
// statuses, new orders in other statuses and lock changes post nothing.
func TestAlertOncePerOrderEnteringTheStatus(t *testing.T) {
	url, js := fixture.Start(t)
	into := fixture.StatusChanged(1, "5", "6", 1)
	for _, ev := range []events.Event{
		into,
		fixture.StatusChanged(2, "6", "7", 2),   // out of 6: not in the filter
		fixture.Created(3, "6", 3),              // new in 6
		fixture.LockChanged(4, "6", 4),          // in 6, but a lock change
		fixture.Created(5, "3", 5),              // new in another status
		fixture.StatusChanged(6, "5.1", "6", 6), // from a decimal status
	} {
		fixture.Publish(t, js, ev, true)
	}
	fixture.Publish(t, js, into, false) // stored twice

	hook := &webhook{failFirst: 2}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	args := []string{"-nats", url, "-status", "6", "-webhook", srv.URL, "-retry", "10ms", "-all"}
	runUntilAcked(t, args, 5) // the 5 events the filter selects

	calls, lines := hook.result()
	want := []string{
		"order 1 entered status 6 (from 5) at 2026-11-22T10:01:00+01:00",
		"order 3 created in status 6 at 2026-11-22T10:03:00+01:00",
		"order 6 entered status 6 (from 5.1) at 2026-11-22T10:06:00+01:00",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("webhook lines:\n%q\nwant\n%q", lines, want)
	}
	if calls != len(want)+2 {
		t.Errorf("%d posts, want %d (two failed and retried)", calls, len(want)+2)
	}

	// Another consumer reading the stream from the start: everything is
	// seen already.
	runUntilAcked(t, append(args, "-durable", "replay"), 5)
	if again, _ := hook.result(); again != calls {
		t.Errorf("the replay posted %d more times", again-calls)
	}
}

func TestAlertNeedsStatusAndWebhook(t *testing.T) {
	for _, args := range [][]string{{"-webhook", "http://x"}, {"-status", "5"}, {"-status", "5.x", "-webhook", "http://x"}} {
		if _, err := parse(args, func(string) string { return "" }, io.Discard); err == nil {
			t.Errorf("parse(%q) accepted", args)
		}
	}
	c, err := parse([]string{"-status", "5.1"}, func(k string) string {
		return map[string]string{"ALERT_WEBHOOK_URL": "http://hook", "WATCHER_SUBJECT_PREFIX": "shop1.orders"}[k]
	}, io.Discard)
	if err != nil || c.webhook != "http://hook" || c.durable != "orderwatch-alert-5_1" || c.conn.Prefix != "shop1.orders" {
		t.Errorf("from the environment: %+v, %v", c, err)
	}
}

// TestAlertPerShop: in fleet mode (-prefix 'orders.*') two shops publish
// the same change of their own order 1042 at the same second: the same
// event id (it hashes the order id, the change and its times, not the
// shop). Each shop's order entering the status is posted, each once.
func TestAlertPerShop(t *testing.T) {
	url, js := fixture.Start(t)
	ev := fixture.StatusChanged(1042, "5", "6", 1)
	fixture.PublishShop(t, js, "berlin", ev)
	fixture.PublishShop(t, js, "paris", ev)
	fixture.PublishShop(t, js, "paris", fixture.StatusChanged(1043, "5", "6", 2))

	hook := &webhook{}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	args := []string{"-nats", url, "-prefix", "orders.*", "-status", "6", "-webhook", srv.URL, "-retry", "10ms", "-all"}
	runUntilAcked(t, args, 3)
	_, lines := hook.result()
	want := []string{
		"order 1042 of shop berlin entered status 6 (from 5) at 2026-11-22T10:01:00+01:00",
		"order 1042 of shop paris entered status 6 (from 5) at 2026-11-22T10:01:00+01:00",
		"order 1043 of shop paris entered status 6 (from 5) at 2026-11-22T10:02:00+01:00",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("webhook lines:\n%q\nwant\n%q (one per shop's order)", lines, want)
	}
}
