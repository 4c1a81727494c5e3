package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/testnats"
)

// TestFenceCountsThroughSuspend: a lease with the default clock measures
// its deadline on the clock that counts through a system suspend: when
// that clock moves past the deadline while Go's monotonic clock stands
// still (the machine slept), the gate is closed.
func TestFenceCountsThroughSuspend(t *testing.T) {
	var boot atomic.Int64
	was := elapsed
	elapsed = func() time.Duration { return time.Duration(boot.Load()) }
	defer func() { elapsed = was }()

	s := testnats.StartAny(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, ttl, err := Bucket(context.Background(), js, "t_lease", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l := New(kv, ttl, Config{Key: "k", Instance: "a", Host: "h"})
	if l.acquire(context.Background(), 0); l.Gate() != nil {
		t.Fatal("not active after acquiring")
	}
	boot.Add(int64(ttl)) // the machine sleeps for a TTL
	if err := l.Gate(); !errors.Is(err, ErrNotActive) {
		t.Errorf("Gate = %v after a suspend longer than the lease, want ErrNotActive", err)
	}
}
