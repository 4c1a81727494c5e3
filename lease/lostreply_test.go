package lease_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
)

// lostReplyKV is a bucket whose next Update (when armed) reaches the
// server but whose answer is lost: the caller sees a timeout.
type lostReplyKV struct {
	jetstream.KeyValue
	armed atomic.Bool
	lost  atomic.Int32
}

func (k *lostReplyKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	n, err := k.KeyValue.Update(ctx, key, value, rev)
	if err == nil && k.armed.CompareAndSwap(true, false) {
		k.lost.Add(1)
		return 0, context.DeadlineExceeded
	}
	return n, err
}

// TestLostRenewalReplyKeepsTheLease: a renewal reaches the server but its
// answer is lost; the next renewal finds another revision, which is the
// holder's own: it keeps the lease (no demotion, no gap in its gate).
func TestLostRenewalReplyKeepsTheLease(t *testing.T) {
	kv, ttl := bucket(t, runServer(t))
	lost := &lostReplyKV{KeyValue: kv}
	a := start(t, lost, ttl, lease.Config{Instance: "a", Host: "h", Renew: 100 * time.Millisecond})
	waitFor(t, "a active", 5*time.Second, a.Active)
	lost.armed.Store(true)
	waitFor(t, "a renewal's answer lost", 5*time.Second, func() bool { return lost.lost.Load() == 1 })
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		if !a.Active() {
			t.Fatal("a lost its lease over one lost renewal answer")
		}
		time.Sleep(10 * time.Millisecond) // sampling, not waiting for a condition
	}
	if n := a.changes.Load(); n != 1 {
		t.Errorf("a's lease changed %d times, want 1 (acquired only)", n)
	}
}
