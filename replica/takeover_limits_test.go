package replica_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/replica"
)

// faultyKV is a checkpoint bucket whose operations on the group's limits
// key fail on demand: failWrites writes (Put, Create, Update) fail with a
// timeout before they reach the server; while failReads is set every Get
// of it does.
type faultyKV struct {
	jetstream.KeyValue
	failWrites atomic.Int32
	failReads  atomic.Bool
}

var errInjected = errors.New("nats: timeout (injected)")

func isLimits(key string) bool { return strings.HasSuffix(key, ".limits") }

func (k *faultyKV) write(key string) error {
	if isLimits(key) && k.failWrites.Add(-1) >= 0 {
		return errInjected
	}
	return nil
}

func (k *faultyKV) Put(ctx context.Context, key string, v []byte) (uint64, error) {
	if err := k.write(key); err != nil {
		return 0, err
	}
	return k.KeyValue.Put(ctx, key, v)
}

func (k *faultyKV) Create(ctx context.Context, key string, v []byte, opts ...jetstream.KVCreateOpt) (uint64, error) {
	if err := k.write(key); err != nil {
		return 0, err
	}
	return k.KeyValue.Create(ctx, key, v, opts...)
}

func (k *faultyKV) Update(ctx context.Context, key string, v []byte, rev uint64) (uint64, error) {
	if err := k.write(key); err != nil {
		return 0, err
	}
	return k.KeyValue.Update(ctx, key, v, rev)
}

func (k *faultyKV) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if isLimits(key) && k.failReads.Load() {
		return nil, errInjected
	}
	return k.KeyValue.Get(ctx, key)
}

// startFaulty starts the member name on the group's buckets bound with
// the checkpoint bucket behind a faultyKV, set up by fault first.
func (g *group) startFaulty(name string, p *pipeline, fault func(*faultyKV)) *member {
	bk, faults := g.faultyBuckets()
	fault(faults)
	g.configure = func(n string, c *replica.Config) {
		if n == name {
			c.Buckets = bk
		}
	}
	m := g.start(name, p)
	waitFor(g.t, name+" mirroring", func() bool { return m.rep.Status().Mirroring })
	return m
}

// faultyBuckets binds the group's buckets on a connection of their own
// with the checkpoint bucket behind a faultyKV (Config.Buckets).
func (g *group) faultyBuckets() (*replica.Buckets, *faultyKV) {
	b, err := replica.BindBuckets(context.Background(), g.js, g.bucket, ttl, 1, slog.New(slog.DiscardHandler))
	if err != nil {
		g.t.Fatal(err)
	}
	f := &faultyKV{KeyValue: b.Checkpoints}
	b.Checkpoints = f
	return b, f
}

// groupWait has a, the active, told to wait by the service for d: the
// wait saved as its pacer saves it; it returns when the wait ends.
func groupWait(t *testing.T, g *group, a *member, d time.Duration) time.Time {
	t.Helper()
	until := time.Now().Add(d)
	w := plenty.Wait{Until: until, Reason: plenty.WaitThrottled, Why: "429 Retry-After", Measured: time.Now(), Announced: d}
	if err := plenty.SaveWait(a.rep.Records(a.store), w); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the group's limits with a's wait", func() bool { return strings.Contains(g.limits(), "429 Retry-After") })
	return until
}

// groupInWait is a group whose active a was told to wait for d (a
// checkpoint written before), its shop and the end of the wait.
func groupInWait(t *testing.T, d time.Duration) (g *group, a *member, srv *httptest.Server, firstCall *atomic.Int64, until time.Time) {
	t.Helper()
	g = newGroup(t)
	srv, firstCall = shopFirstCall(t)
	a = g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	return g, a, srv, firstCall, groupWait(t, g, a, d)
}

// takesOverInWait kills from and checks that to, once active, makes no
// call before until.
func takesOverInWait(t *testing.T, from, to *member, firstCall *atomic.Int64, until time.Time) {
	t.Helper()
	from.kill()
	waitFor(t, to.name+" active", to.working)
	noCallBefore(t, firstCall, until)
}

// limits reads the group's limits key ("" when missing).
func (g *group) limits() string {
	kv, err := g.js.KeyValue(context.Background(), g.bucket+"_checkpoint")
	if err != nil {
		return ""
	}
	e, err := kv.Get(context.Background(), g.key+".limits")
	if err != nil {
		return ""
	}
	return string(e.Value())
}

// noCallBefore waits for the member's first call to the shop and checks
// it came after until.
func noCallBefore(t *testing.T, firstCall *atomic.Int64, until time.Time) {
	t.Helper()
	waitFor(t, "the first call", func() bool { return firstCall.Load() != 0 })
	if at := time.Unix(0, firstCall.Load()); at.Before(until) {
		t.Errorf("called the shop at %v, %v inside the group's wait (until %v)", at.Format(time.RFC3339Nano), until.Sub(at), until.Format(time.RFC3339Nano))
	}
}

// TestRetriedTakeoverKeepsTheGroupsWait: the replica that takes over
// cannot write the group's limits once (a NATS timeout) and tries its
// takeover again: it still honours the wait the earlier active announced.
func TestRetriedTakeoverKeepsTheGroupsWait(t *testing.T) {
	t.Parallel()
	g, a, srv, firstCall, until := groupInWait(t, 6*time.Second)
	pending := make(chan plenty.Wait, 1)
	b := g.startFaulty("b", callingPipeline(t, srv.URL, pending), func(f *faultyKV) { f.failWrites.Store(1) })
	takesOverInWait(t, a, b, firstCall, until)
}

// TestInterruptedTakeoverKeepsTheGroupsWait: the replica that takes over
// after a is stopped between its first checkpoint and the group's limits
// (it cannot read them, then dies); the next one honours a's wait.
func TestInterruptedTakeoverKeepsTheGroupsWait(t *testing.T) {
	t.Parallel()
	g, a, srv, firstCall, until := groupInWait(t, 8*time.Second)
	b := g.startFaulty("b", &pipeline{}, func(f *faultyKV) { f.failReads.Store(true) })
	a.kill()
	waitFor(t, "b's takeover failing", func() bool { return strings.Contains(b.logs.String(), "taking over failed") })
	pending := make(chan plenty.Wait, 1)
	c := g.start("c", callingPipeline(t, srv.URL, pending))
	waitFor(t, "c mirroring", func() bool { return c.rep.Status().Mirroring || c.rep.Active() })
	takesOverInWait(t, b, c, firstCall, until)
}

// TestWaitReachesTheGroupBeforeTheNextCall: a wait the service announced
// is in the group's limits when its save returns (the client's next call
// comes after it), even right after another record's write; the replica
// that takes over 0.5 s later honours it.
func TestWaitReachesTheGroupBeforeTheNextCall(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	srv, firstCall := shopFirstCall(t)
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	pending := make(chan plenty.Wait, 1)
	b := g.start("b", callingPipeline(t, srv.URL, pending))
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })

	recs := a.rep.Records(a.store)
	if err := recs.SaveRecord("budget", map[string]any{"level": 100, "at": time.Now(), "limit": 1000}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the budget in the group's limits", func() bool { return strings.Contains(g.limits(), `"budget"`) })
	until := time.Now().Add(5 * time.Second)
	w := plenty.Wait{Until: until, Reason: plenty.WaitThrottled, Why: "429 right after the budget", Measured: time.Now(), Announced: 5 * time.Second}
	if err := plenty.SaveWait(recs, w); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(g.limits(), "429 right after the budget") {
		t.Error("the wait is not in the group's limits when its save returned")
	}
	time.Sleep(500 * time.Millisecond) // the active dies half a second after the 429
	takesOverInWait(t, a, b, firstCall, until)
}
