package events_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/events"
)

func id(n int) string { return fmt.Sprintf("%032x", n) }

func TestMemoryForgetsAfterTTLAndBeyondMax(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	m := events.NewMemory(3, time.Hour, func() time.Time { return now })
	seen := func(n int) bool {
		ok, err := m.Seen(ctx, id(n))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	m.Done(ctx, id(1))
	now = now.Add(30 * time.Minute)
	m.Done(ctx, id(2))
	if !seen(1) || !seen(2) || seen(3) {
		t.Fatalf("seen 1, 2, 3: %v %v %v", seen(1), seen(2), seen(3))
	}
	now = now.Add(30 * time.Minute) // 1 is an hour old: forgotten
	if seen(1) || !seen(2) {
		t.Errorf("after an hour: seen 1 %v, 2 %v", seen(1), seen(2))
	}
	m.Done(ctx, id(3))
	m.Done(ctx, id(4))
	m.Done(ctx, id(5)) // four within the hour, room for three: 2 goes
	if seen(2) || !seen(3) || !seen(4) || !seen(5) || m.Len() != 3 {
		t.Errorf("beyond max: seen 2..5 %v %v %v %v, len %d", seen(2), seen(3), seen(4), seen(5), m.Len())
	}
	now = now.Add(50 * time.Minute)
	m.Done(ctx, id(3)) // again: an hour from now
	now = now.Add(20 * time.Minute)
	if !seen(3) || seen(4) || seen(5) {
		t.Errorf("a repeated Done: seen 3 %v (want true), 4 %v, 5 %v", seen(3), seen(4), seen(5))
	}
}

// onceSuite is the behaviour every Deduper shares, through Once.
func onceSuite(t *testing.T, d events.Deduper) {
	ctx := context.Background()
	calls := 0
	handle := func(err error) func(context.Context) error {
		return func(context.Context) error { calls++; return err }
	}
	boom := errors.New("webhook down")
	if err := events.Once(ctx, d, id(7), handle(boom)); !errors.Is(err, boom) {
		t.Fatalf("a failed handling: %v", err)
	}
	if err := events.Once(ctx, d, id(7), handle(nil)); err != nil {
		t.Fatal(err)
	}
	if err := events.Once(ctx, d, id(7), handle(nil)); err != nil {
		t.Fatal(err)
	}
	if calls != 2 {
		t.Errorf("handle called %d times, want 2 (failed, then once)", calls)
	}
	if err := events.Once(ctx, d, id(8), handle(nil)); err != nil || calls != 3 {
		t.Errorf("another id: %v, %d calls", err, calls)
	}
}

func TestOnceMemory(t *testing.T) { onceSuite(t, events.NewMemory(100, time.Hour, nil)) }

// TestKVSurvivesTheConsumer: a KV Deduper on an in-process NATS server; a
// second instance on the same bucket (the consumer restarted) knows what
// the first handled.
func TestKVSurvivesTheConsumer(t *testing.T) {
	js := startJS(t)
	ctx := context.Background()
	d, err := events.CreateKV(ctx, js, "orders_seen", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	onceSuite(t, d)

	kv, err := js.KeyValue(ctx, "orders_seen")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := kv.Status(ctx); err != nil || st.TTL() != 24*time.Hour {
		t.Errorf("bucket TTL %v (%v), want the window 24h", st.TTL(), err)
	}
	again := events.NewKV(kv)
	if seen, err := again.Seen(ctx, id(7)); err != nil || !seen {
		t.Errorf("after a restart: seen %v, %v", seen, err)
	}
	if _, err := again.Seen(ctx, "orders.>"); err == nil {
		t.Error("a key that is not an event id was looked up")
	}
}
