package events_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/events"
)

// concurrentDeliveries: a second delivery of an event arrives while the
// first is still being handled (an ack wait that ran out while another
// instance of the same durable consumer works on the message): the
// handler runs once. The second delivery is told the event is in
// progress (so its caller naks it), and a delivery after the first one's
// success finds the event done.
func concurrentDeliveries(t *testing.T, d events.Deduper) {
	t.Helper()
	ctx := context.Background()
	var calls atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	handle := func(context.Context) error {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return nil
	}
	first := make(chan error, 1)
	go func() { first <- events.Once(ctx, d, id(42), handle) }()
	<-entered
	second := events.Once(ctx, d, id(42), handle) // while the first handles it
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first delivery: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times for two concurrent deliveries of one id, want 1", n)
	}
	if !errors.Is(second, events.ErrInProgress) {
		t.Errorf("the second delivery returned %v, want ErrInProgress (nak it: it comes again)", second)
	}
	if err := events.Once(ctx, d, id(42), handle); err != nil || calls.Load() != 1 {
		t.Errorf("a delivery after the handling: %v, %d calls", err, calls.Load())
	}
}

// crashedClaim: a delivery claims an event and crashes (neither Done nor
// released): another delivery is held off while the claim holds and
// handles the event once it has expired.
func crashedClaim(t *testing.T, d events.Deduper, advance func(time.Duration)) {
	t.Helper()
	ctx := context.Background()
	if ok, err := d.Claim(ctx, id(43)); !ok || err != nil {
		t.Fatalf("claim: %v, %v", ok, err)
	}
	calls := 0
	handle := func(context.Context) error { calls++; return nil }
	if err := events.Once(ctx, d, id(43), handle); !errors.Is(err, events.ErrInProgress) || calls != 0 {
		t.Fatalf("while the crashed claim holds: %v, %d calls", err, calls)
	}
	advance(events.DefaultClaimTTL + time.Second)
	if err := events.Once(ctx, d, id(43), handle); err != nil || calls != 1 {
		t.Fatalf("after the claim expired: %v, %d calls, want the event handled", err, calls)
	}
	if err := events.Once(ctx, d, id(43), handle); err != nil || calls != 1 {
		t.Errorf("once handled: %v, %d calls", err, calls)
	}
}

func TestOnceConcurrentDeliveriesMemory(t *testing.T) {
	concurrentDeliveries(t, events.NewMemory(100, time.Hour, nil))
}

func TestOnceConcurrentDeliveriesKV(t *testing.T) {
	concurrentDeliveries(t, newKV(t, "concurrent"))
}

func TestOnceAfterACrashedClaimMemory(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	m := events.NewMemory(100, time.Hour, func() time.Time { return now })
	crashedClaim(t, m, func(d time.Duration) { now = now.Add(d) })
}

func TestOnceAfterACrashedClaimKV(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	kv := newKV(t, "crashed")
	events.SetKVClock(kv, func() time.Time { return now })
	crashedClaim(t, kv, func(d time.Duration) { now = now.Add(d) })
}

// TestKVClaimIsAtomicAcrossInstances: two instances of a consumer (two KV
// dedupers on one bucket) claim one id at once: one gets it.
func TestKVClaimIsAtomicAcrossInstances(t *testing.T) {
	a := newKV(t, "instances")
	b := events.NewKV(events.KVBucket(a))
	ctx := context.Background()
	for n := range 20 {
		results := make(chan bool, 2)
		for _, d := range []*events.KV{a, b} {
			go func() {
				ok, err := d.Claim(ctx, id(1000+n))
				if err != nil && !errors.Is(err, events.ErrInProgress) {
					t.Error(err)
				}
				results <- ok
			}()
		}
		if got := btoi(<-results) + btoi(<-results); got != 1 {
			t.Fatalf("id %d: %d instances got the claim, want 1", n, got)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newKV(t *testing.T, bucket string) *events.KV {
	t.Helper()
	d, err := events.CreateKV(context.Background(), startJS(t), bucket, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
