package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/lease"
)

// statusOnceFailsKV is a bucket whose second Status request fails (the
// one a lease makes right after it wrote the key, to tell whether the
// bucket was created again; a server short of CPU lets it time out).
type statusOnceFailsKV struct {
	jetstream.KeyValue
	calls atomic.Int32
}

func (k *statusOnceFailsKV) Status(ctx context.Context) (jetstream.KeyValueStatus, error) {
	if k.calls.Add(1) == 2 {
		return nil, errors.New("status: timeout (injected)")
	}
	return k.KeyValue.Status(ctx)
}

// TestUnreadBucketStatusIsReadAgain: the lease was acquired but the
// bucket's status could not be read right after, so whether the bucket
// was created again under an earlier holder is not known: the lease waits
// (a whole TTL at most) and reads the status again meanwhile; the bucket
// it first saw is still there, so it is active at once. The clock stands
// still: before, only a TTL passing made it active (a takeover under load
// waited 9 s more, logged as "a bucket created again").
func TestUnreadBucketStatusIsReadAgain(t *testing.T) {
	kv, ttl := bucket(t, runServer(t))
	flaky := &statusOnceFailsKV{KeyValue: kv}
	a := start(t, flaky, ttl, lease.Config{Instance: "a", Host: "h", Renew: 100 * time.Millisecond, Mono: func() time.Duration { return time.Hour }})
	waitFor(t, "a active once the bucket's status was read again", 10*time.Second, func() bool { return a.Active() && a.changes.Load() == 1 })
	if n := flaky.calls.Load(); n < 3 {
		t.Errorf("the status was read %d times, want the failed read repeated", n)
	}
}
