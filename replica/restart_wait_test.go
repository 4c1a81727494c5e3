package replica_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plenty"
)

// holdAs has another process (instance) hold the lease key until release:
// its value written again well inside the TTL.
func (g *group) holdAs(instance string) (release func()) {
	kv, err := g.js.KeyValue(context.Background(), g.bucket+"_lease")
	if err != nil {
		g.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	put := func() {
		v, _ := json.Marshal(lease.Value{Instance: instance, Host: "elsewhere", Nonce: instance, Since: time.Now()})
		_, _ = kv.Put(context.Background(), g.key, v)
	}
	put()
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				_ = kv.Delete(context.Background(), g.key)
				return
			case <-time.After(ttl / 4):
				put()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// TestRestartKeepsTheReplicasOwnWait: the active is told to wait by the
// service (a 429) while every write of the group's limits fails, and the
// process dies before any write succeeds; another process holds the lease
// when it starts again on the same state file, so it rewinds the file to
// the group's checkpoint, which holds no such wait. The wait must survive
// the restart and the rewind: it stays in the state file, reaches the
// group's limits once NATS takes writes again (from the standby), and
// binds the replica when it takes the lease back. Before the fix, the
// records saved through Records and not yet written were kept in memory
// only: the restarted process lost the wait at the rewind.
func TestRestartKeepsTheReplicasOwnWait(t *testing.T) {
	g := newGroup(t)
	a, kv, w := g.activeWithUnwrittenWait("429 whose group write failed before a restart")
	until := w.Until
	path := a.store.Path()
	a.ckpt.fail.Store(true) // dies as in a crash: no last checkpoint (its buckets are on a connection that stays)
	a.kill()
	_ = a.store.Close()
	release := g.holdAs("x")
	defer release()

	srv, _ := shopFirstCall(t)
	pending := make(chan plenty.Wait, 1)
	a2 := g.startOn("a", path, callingPipeline(t, srv.URL, pending))
	waitFor(t, "a mirroring under x", func() bool { return a2.rep.Status().Mirroring })
	hasWait := func(waits []plenty.Wait) bool {
		return slices.ContainsFunc(waits, func(have plenty.Wait) bool { return have.Why == w.Why })
	}
	if waits, _, err := plenty.LoadWaits(a2.store); err != nil || !hasWait(waits) {
		t.Errorf("the wait the service announced to a is gone from its state file after the restart and the rewind: %+v (%v)", waits, err)
	}
	kv.failWrites.Store(0)
	waitFor(t, "the wait in the group's limits, written by the standby", func() bool { return strings.Contains(g.limits(), w.Why) })

	release()
	waitFor(t, "a active again", a2.working)
	select {
	case got := <-pending:
		if got.Until.Before(until.Add(-time.Second)) {
			t.Errorf("a's client after taking the lease back waits until %v, want the wait it was told until %v", got.Until, until)
		}
	case <-time.After(limit):
		t.Fatal("a's client did not start")
	}
}
