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

// slowReplyKV is a bucket whose Updates (when armed) reach the server at
// once but whose answers come delay later (a server or a process short of
// CPU): the caller that gives up before then sees its context's error.
type slowReplyKV struct {
	jetstream.KeyValue
	delay    time.Duration
	armed    atomic.Bool
	answered atomic.Int32
}

func (k *slowReplyKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	n, err := k.KeyValue.Update(context.WithoutCancel(ctx), key, value, rev)
	if !k.armed.Load() {
		return n, err
	}
	t := time.NewTimer(k.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-t.C:
		k.answered.Add(1)
		return n, err
	}
}

// TestSlowRenewalAnswersKeepTheLease: every renewal's answer comes later
// than the renewal interval but well inside the lease's deadline (the
// starved 1,000-shop fleet of issue 34: round trips of 2-3 s against a
// renewal every 3 s). The holder keeps its lease: a renewal waits for
// its answer until the deadline, and the next one goes out a renewal
// interval after the last one was sent. (Before: a renewal gave up after
// the renewal interval, its late success was lost, the retries found
// another revision, read it back and renewed again, and the lease was
// demoted at the deadline of the last answered renewal.)
func TestSlowRenewalAnswersKeepTheLease(t *testing.T) {
	kv, ttl := bucket(t, runServer(t))
	// TTL 2 s, deadline 1.6 s after a renewal is sent; answers after
	// 0.6 s, one renewal interval and a half: two in a row still
	// answer 0.4 s before the deadline.
	slow := &slowReplyKV{KeyValue: kv, delay: 600 * time.Millisecond}
	a := start(t, slow, ttl, lease.Config{Instance: "a", Host: "h", Renew: 400 * time.Millisecond, Margin: 400 * time.Millisecond})
	waitFor(t, "a active", 5*time.Second, a.Active)
	slow.armed.Store(true)
	waitFor(t, "six slow renewals answered", 10*time.Second, func() bool { return slow.answered.Load() >= 6 || a.changes.Load() > 1 })
	if n := a.changes.Load(); n != 1 {
		t.Errorf("a's lease changed %d times with slow renewal answers, want 1 (acquired only)", n)
	}
	if !a.Active() {
		t.Error("a is not active after slow renewal answers")
	}
}

// hangKV is a bucket whose next Update (when armed) reaches the server but
// whose answer never comes: the request waits until its context ends.
type hangKV struct {
	jetstream.KeyValue
	armed atomic.Bool
	hung  atomic.Int32
}

func (k *hangKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	n, err := k.KeyValue.Update(context.WithoutCancel(ctx), key, value, rev)
	if err == nil && k.armed.CompareAndSwap(true, false) {
		k.hung.Add(1)
		<-ctx.Done()
		return 0, ctx.Err()
	}
	return n, err
}

// TestHungRenewalAnswerKeepsTheLease: a renewal reaches the server and its
// answer never comes (a reply lost in a reconnect). Waiting for it until
// the deadline would leave no time to find out; a renewal interval after
// it was sent the renewal goes out once more (the same revision: at most
// one of the two is written), finds the revision its first copy wrote,
// adopts it and renews on it: the holder keeps its lease.
func TestHungRenewalAnswerKeepsTheLease(t *testing.T) {
	kv, ttl := bucket(t, runServer(t))
	hang := &hangKV{KeyValue: kv}
	a := start(t, hang, ttl, lease.Config{Instance: "a", Host: "h", Renew: 400 * time.Millisecond, Margin: 400 * time.Millisecond})
	waitFor(t, "a active", 5*time.Second, a.Active)
	hang.armed.Store(true)
	waitFor(t, "a renewal's answer hung", 5*time.Second, func() bool { return hang.hung.Load() == 1 })
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); {
		if a.changes.Load() != 1 {
			break
		}
		time.Sleep(10 * time.Millisecond) // sampling, not waiting for a condition
	}
	if n := a.changes.Load(); n != 1 {
		t.Errorf("a's lease changed %d times over one hung renewal answer, want 1 (acquired only)", n)
	}
}
