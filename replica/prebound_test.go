package replica_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/orderwatch/orderwatch/replica"
)

// TestPreboundBucketsAndTakeoverSlots: replicas handed buckets bound once
// (a fleet) and a shared bound on takeovers work as a group: the active
// one holds the lease but calls nothing while no takeover slot is free,
// works once one is, and a standby on the same buckets takes over when it
// is gone.
func TestPreboundBucketsAndTakeoverSlots(t *testing.T) {
	g := newGroup(t)
	b, err := replica.BindBuckets(context.Background(), g.js, g.bucket, ttl, 1, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	slots := make(chan struct{}, 1)
	slots <- struct{}{} // taken: no takeover yet
	g.configure = func(_ string, c *replica.Config) { c.Buckets, c.Takeovers = b, slots }
	a := g.start("a", &pipeline{})
	waitFor(t, "a holds the lease", a.rep.Active)
	if a.working() {
		t.Fatal("a works while every takeover slot is taken")
	}
	<-slots
	waitFor(t, "a working once a slot is free", a.working)
	c := g.start("c", &pipeline{})
	a.kill()
	waitFor(t, "c working after a died", c.working)
	if n := len(slots); n != 0 {
		t.Errorf("%d takeover slots still taken after the takeovers", n)
	}
}
