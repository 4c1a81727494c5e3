package events_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/orderwatch/orderwatch/events"
)

// takenOverClaim: a slow delivery A holds a claim past its TTL, a second
// delivery B takes the expired claim over and handles the event; then A's
// handler fails. A's release must not give up B's claim: a third delivery
// C while B still handles the event is told it is in progress, and the
// handler never runs twice at once.
func takenOverClaim(t *testing.T, d events.Deduper, advance func(time.Duration)) {
	t.Helper()
	ctx := context.Background()
	aOut, aDone := slowDelivery(ctx, d, id(44), errors.New("A failed"))
	advance(events.DefaultClaimTTL + time.Second) // A's claim expired
	bOut, bDone := slowDelivery(ctx, d, id(44), nil)
	close(aOut)
	if err := <-aDone; err == nil {
		t.Fatal("A's failure was not returned")
	}
	cRan := false
	err := events.Once(ctx, d, id(44), func(context.Context) error { cRan = true; return nil })
	close(bOut)
	if err := <-bDone; err != nil {
		t.Fatalf("B: %v", err)
	}
	if cRan || !errors.Is(err, events.ErrInProgress) {
		t.Errorf("a delivery while B handles the event (A, whose claim B took over, failed): ran %v, %v; want ErrInProgress: A's release gave up B's claim", cRan, err)
	}
	if err := events.Once(ctx, d, id(44), func(context.Context) error { t.Error("handled again after B"); return nil }); err != nil {
		t.Errorf("after B: %v", err)
	}
}

// slowDelivery runs Once for id in the background with a handler that
// returns result once out is closed; it returns when the handler runs
// (or Once returned without running it).
func slowDelivery(ctx context.Context, d events.Deduper, id string, result error) (out chan struct{}, done chan error) {
	in := make(chan struct{})
	var entered sync.Once
	out, done = make(chan struct{}), make(chan error, 1)
	go func() {
		done <- events.Once(ctx, d, id, func(context.Context) error {
			entered.Do(func() { close(in) })
			<-out
			return result
		})
		entered.Do(func() { close(in) }) // not handled: do not wait
	}()
	<-in
	return out, done
}

func TestOnceTakenOverClaimMemory(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	m := events.NewMemory(100, time.Hour, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	takenOverClaim(t, m, func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() })
}

func TestOnceTakenOverClaimKV(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	kv := newKV(t, "takenover")
	events.SetKVClock(kv, func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	takenOverClaim(t, kv, func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() })
}

// stoppedAfterHandling: the consumer is stopped (its context ends) while
// the handler finishes its work and returns nil: the work is done, so the
// id is recorded as done, and a delivery after the restart does not
// handle the event again.
func stoppedAfterHandling(t *testing.T, d events.Deduper) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	calls := 0
	err := events.Once(ctx, d, id(45), func(context.Context) error {
		calls++
		stop() // Ctrl-C while the webhook's post is under way; the post succeeds
		return nil
	})
	if err != nil {
		t.Logf("Once after the stop: %v", err)
	}
	if err := events.Once(context.Background(), d, id(45), func(context.Context) error { calls++; return nil }); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("the handler ran %d times: a handling that succeeded as the consumer stopped was not recorded", calls)
	}
}

func TestOnceStoppedAfterHandlingMemory(t *testing.T) {
	stoppedAfterHandling(t, events.NewMemory(100, time.Hour, nil))
}

func TestOnceStoppedAfterHandlingKV(t *testing.T) { stoppedAfterHandling(t, newKV(t, "stopped")) }

// panicked: a handler that panics releases its claim (the panic goes on
// to the caller); the redelivery handles the event.
func panicked(t *testing.T, d events.Deduper) {
	t.Helper()
	ctx := context.Background()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the handler's panic was swallowed")
			}
		}()
		events.Once(ctx, d, id(46), func(context.Context) error { panic("boom") })
	}()
	calls := 0
	if err := events.Once(ctx, d, id(46), func(context.Context) error { calls++; return nil }); err != nil || calls != 1 {
		t.Errorf("after a panic: %v, %d calls, want the event handled", err, calls)
	}
}

func TestOncePanicMemory(t *testing.T) { panicked(t, events.NewMemory(100, time.Hour, nil)) }

func TestOncePanicKV(t *testing.T) { panicked(t, newKV(t, "panicked")) }

// TestOnceManyDeliveriesAtOnce: 32 deliveries of one id at once, through
// two KV instances on one bucket and a Memory: each deduper runs the
// handler once; every other delivery is told it is in progress or done.
func TestOnceManyDeliveriesAtOnce(t *testing.T) {
	a := newKV(t, "many")
	b := events.NewKV(events.KVBucket(a))
	for name, ds := range map[string][]events.Deduper{"kv": {a, b}, "memory": {events.NewMemory(10, time.Hour, nil)}} {
		var calls atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for n := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				err := events.Once(context.Background(), ds[n%len(ds)], id(47), func(context.Context) error {
					calls.Add(1)
					time.Sleep(time.Millisecond)
					return nil
				})
				if err != nil && !errors.Is(err, events.ErrInProgress) {
					t.Errorf("%s: %v", name, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if n := calls.Load(); n != 1 {
			t.Errorf("%s: the handler ran %d times for 32 deliveries of one id at once", name, n)
		}
	}
}

// TestKeyKeepsShopsApart: two shops publish the same event id; keyed by
// Key, a KV deduper handles each shop's event once.
func TestKeyKeepsShopsApart(t *testing.T) {
	ev := events.Event{ID: id(48)}
	berlin, paris := nats.Header{"Orderwatch-Shop": {"berlin"}}, nats.Header{"Orderwatch-Shop": {"paris"}}
	if k := events.Key(berlin, ev); k != "berlin."+ev.ID {
		t.Errorf("Key of berlin's event: %q", k)
	}
	if k := events.Key(nats.Header{}, ev); k != ev.ID {
		t.Errorf("Key without a shop: %q, want the event id", k)
	}
	d := newKV(t, "shops")
	calls := 0
	for _, h := range []nats.Header{berlin, paris, berlin, paris} {
		if err := events.Once(context.Background(), d, events.Key(h, ev), func(context.Context) error { calls++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 {
		t.Errorf("handled %d times, want once per shop", calls)
	}
}
