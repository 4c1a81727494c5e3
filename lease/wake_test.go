package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/lease"
)

// TestNoWatchLeaseTakesKeyOnWake: a lease that watches no key (a fleet's
// pipeline: the fleet watches the whole bucket) takes a released key when
// told with Wake, not at its next attempt (here an hour away).
func TestNoWatchLeaseTakesKeyOnWake(t *testing.T) {
	s := runServer(t)
	kv, ttl := bucket(t, s)
	a := start(t, kv, ttl, lease.Config{Instance: "a"})
	waitFor(t, "a active", 10*time.Second, a.Active)
	b := start(t, kv, ttl, lease.Config{Instance: "b", NoWatch: true, Renew: time.Hour})
	<-b.Decided()
	if b.Active() {
		t.Fatal("b active while a holds the lease")
	}
	a.stop() // releases the key
	<-a.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, found, err := a.Holder(ctx); err != nil || found {
		t.Fatalf("after a's release: found %v, err %v", found, err)
	}
	b.Wake()
	waitFor(t, "b active after Wake", 10*time.Second, b.Active)
}
