package replica_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	wiring "github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/state"
)

// The replica's role loop against an in-process NATS server, real state
// files and pipelines that record what the loop asks of them. The lease
// lives a second: each takeover takes about that long.

const (
	ttl    = time.Second
	stream = "ORDERS"
	shop   = "https://shop.example"
	limit  = 15 * time.Second // of every wait for the loop
)

// group is a hot-standby group of replicas sharing one NATS server.
type group struct {
	t      *testing.T
	url    string
	js     jetstream.JetStream
	key    string
	bucket string
	// configure, when set, changes each member's configuration (start).
	configure func(name string, c *replica.Config)
}

func newGroup(t *testing.T) *group {
	return newGroupOn(t, testnats.StartAny(t).ClientURL(), 1)
}

// newGroupOn is a group on the NATS server (or cluster) at url, with a
// stream of the replicas given.
func newGroupOn(t *testing.T, url string, replicas int) *group {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{Name: stream, Subjects: []string{"orders.>"}, Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	return &group{t: t, url: url, js: js, key: lease.Key(shop, stream), bucket: "test"}
}

// pipeline records the loop's requests.
type pipeline struct {
	mu       sync.Mutex
	running  bool
	starts   []time.Time
	stops    []bool // flush of each stop
	restored int
	// failRestore makes Restored fail (a rebuild that cannot work).
	failRestore bool
	// onStart, when set, runs in the loops' place until their stop, with
	// the replica's state file.
	onStart func(ctx context.Context, st *state.Store)
	// onLimits, when set, applies the group's limits to what onStart runs
	// (replica.LimitsApplier).
	onLimits func(st *state.Store)
	store    *state.Store // set by start
}

func (p *pipeline) GroupLimits() {
	if p.onLimits != nil {
		p.onLimits(p.store)
	}
}

func (p *pipeline) Start(ctx context.Context) func(bool) int {
	p.mu.Lock()
	p.running = true
	p.starts = append(p.starts, time.Now())
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if p.onStart != nil {
			p.onStart(ctx, p.store)
		}
		<-ctx.Done()
	}()
	return func(flush bool) int {
		cancel()
		<-done
		p.mu.Lock()
		defer p.mu.Unlock()
		p.running = false
		p.stops = append(p.stops, flush)
		return 0
	}
}

func (p *pipeline) Restored() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.restored++
	if p.failRestore {
		return errors.New("rebuild: cannot work")
	}
	return nil
}

func (p *pipeline) Rescan(time.Time, func()) {}

func (p *pipeline) state() (running bool, starts []time.Time, stops []bool, restored int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running, append([]time.Time(nil), p.starts...), append([]bool(nil), p.stops...), p.restored
}

// member is one replica of the group, running until it is killed or the
// test ends.
type member struct {
	name  string
	nc    *nats.Conn
	store *state.Store
	ckpt  *checkpointStore
	rep   *replica.Replica
	p     *pipeline
	logs  *e2e.LockedBuffer
	reg   *prometheus.Registry

	cancel context.CancelFunc
	done   chan struct{}
}

// checkpointStore is the state file with checkpoints that fail on demand.
type checkpointStore struct {
	*state.Store
	fail atomic.Bool
}

func (s *checkpointStore) Checkpoint() (state.Checkpoint, bool, error) {
	if s.fail.Load() {
		return state.Checkpoint{}, false, errors.New("checkpoint: disk error")
	}
	return s.Store.Checkpoint()
}

func (g *group) start(name string, p *pipeline) *member {
	return g.startOn(name, filepath.Join(g.t.TempDir(), name+".db"), p)
}

// startOn starts a member on the state file at path.
func (g *group) startOn(name, path string, p *pipeline) *member {
	t := g.t
	nc, err := nats.Connect(g.url)
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(path, state.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	p.store = st
	limits, merges := wiring.LimitRecords()
	m := &member{name: name, nc: nc, store: st, ckpt: &checkpointStore{Store: st}, p: p, logs: &e2e.LockedBuffer{}, reg: prometheus.NewRegistry(), done: make(chan struct{})}
	cfg := replica.Config{
		Registerer: m.reg,
		NC:         nc, Store: m.ckpt, FileLock: st.LockID(), Stream: stream, SubjectPrefix: "orders",
		Key: g.key, Instance: name, Host: "h", Bucket: g.bucket, TTL: ttl,
		Limits: limits, Merges: merges,
		Logger: slog.New(slog.NewTextHandler(m.logs, nil)),
		// CheckpointEvery: the tests' sweeps (advance) move the watermark
		// without an event and wait for its checkpoint (the default skips
		// it for 10 s: TestSweepWithoutEventsSkipsItsCheckpoint).
		Tuning: replica.Tuning{Tick: 50 * time.Millisecond, Retry: 50 * time.Millisecond, CheckpointWait: time.Second, CheckpointEvery: time.Nanosecond},
	}
	if g.configure != nil {
		g.configure(name, &cfg)
	}
	m.rep = replica.New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go func() { defer close(m.done); m.rep.Run(ctx, p) }()
	t.Cleanup(func() { m.stop(); nc.Close(); st.Close() })
	return m
}

// stop ends the member's Run (it releases the lease when it still can).
func (m *member) stop() {
	m.cancel()
	<-m.done
}

// kill ends the member as a crash would: its NATS connection is gone, so
// the lease is neither renewed nor released.
func (m *member) kill() {
	m.nc.Close()
	m.stop()
}

func (m *member) working() bool {
	running, _, _, _ := m.p.state()
	return running && m.rep.Working() && m.rep.Gate() == nil
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testnats.WaitFor(t, what, limit, cond)
}

// checkpoint reads the group's checkpoint.
func (g *group) checkpoint() (lease.Checkpoint, bool) {
	kv, err := g.js.KeyValue(context.Background(), g.bucket+"_checkpoint")
	if err != nil {
		return lease.Checkpoint{}, false
	}
	cp, found, err := lease.NewCheckpoints(kv, g.key).Read(context.Background())
	return cp, found && err == nil
}

// activeWithCheckpoint starts a, waits for it to work and has it write a
// checkpoint of its watermark wm.
func (g *group) activeWithCheckpoint(p *pipeline, wm time.Time) *member {
	a := g.start("a", p)
	waitFor(g.t, "a active", a.working)
	if err := a.store.Commit(state.Commit{Watermark: &wm}); err != nil {
		g.t.Fatal(err)
	}
	a.rep.Swept()
	waitFor(g.t, "a's checkpoint", func() bool {
		cp, ok := g.checkpoint()
		return ok && cp.Instance == "a" && strings.Contains(string(cp.State), wm.Format(time.RFC3339))
	})
	return a
}

// TestFailoverWhenActiveDies: the active replica dies (no renewal, no
// release); the standby takes over once the lease has expired, with the
// group's state restored from the checkpoint (the pipeline rebuilt from
// it), and calls only after the dead one's gate had closed.
func TestFailoverWhenActiveDies(t *testing.T) {
	g := newGroup(t)
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm)
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring && b.rep.Status().Holder == "a" })
	if b.working() {
		t.Fatal("b works while a holds the lease")
	}
	var aGateClosed atomic.Int64
	go func() {
		for a.rep.Gate() == nil {
			time.Sleep(time.Millisecond)
		}
		aGateClosed.Store(time.Now().UnixNano())
	}()
	a.kill()
	waitFor(t, "b active", b.working)
	_, starts, _, restored := b.p.state()
	if restored != 1 {
		t.Errorf("b's pipeline rebuilt %d times after the takeover, want 1", restored)
	}
	if m, err := b.store.Meta(); err != nil || !m.Watermark.Equal(wm) {
		t.Errorf("b's watermark after the takeover: %v (%v), want a's checkpoint %v", m.Watermark, err, wm)
	}
	if closed := aGateClosed.Load(); closed == 0 || !time.Unix(0, closed).Before(starts[0]) {
		t.Errorf("b started its loops at %v, a's gate closed at %v: both could call the shop", starts[0], time.Unix(0, closed))
	}
	if cp, ok := g.checkpoint(); !ok || cp.Instance != "b" {
		t.Errorf("the new tenure's first checkpoint is not b's: %+v", cp)
	}
}

// TestLeaderOnlyWhileWorking: a replica that holds the lease but whose
// takeover keeps failing makes no call and says 0 in orderwatch_leader,
// so that the alert on a group without a working active fires.
func TestLeaderOnlyWhileWorking(t *testing.T) {
	g := newGroup(t)
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	if got := metric(t, a, "orderwatch_leader"); got != 1 {
		t.Fatalf("the working active's orderwatch_leader = %v, want 1", got)
	}
	b := g.start("b", &pipeline{failRestore: true})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	a.kill()
	waitFor(t, "b's takeover failing", func() bool { return strings.Count(b.logs.String(), "taking over failed") >= 2 })
	if !b.rep.Active() {
		t.Fatal("b does not hold the lease")
	}
	if b.working() {
		t.Fatal("b works although its takeover failed")
	}
	if got := metric(t, b, "orderwatch_leader"); got != 0 {
		t.Errorf("orderwatch_leader = %v while b holds the lease but its takeover fails, want 0", got)
	}
}

// TestDemotionWhenAnotherHoldsTheLease: the active replica finds at a
// renewal that another process holds the lease: its loops stop without a
// flush (its outbox is the group's to undo), and it rewinds to the group's
// checkpoint and mirrors the stream as a standby.
func TestDemotionWhenAnotherHoldsTheLease(t *testing.T) {
	g := newGroup(t)
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	g.takenBy("x")
	waitFor(t, "a's loops stopped", func() bool { _, _, stops, _ := a.p.state(); return len(stops) > 0 })
	if _, _, stops, _ := a.p.state(); stops[0] {
		t.Error("a flushed its outbox after losing the lease")
	}
	waitFor(t, "a mirroring", a.demotedToStandby)
}

// takenBy writes the lease key as another process's (an operator, a split
// brain): the holder's next renewal finds another revision.
func (g *group) takenBy(instance string) {
	kv, err := g.js.KeyValue(context.Background(), g.bucket+"_lease")
	if err != nil {
		g.t.Fatal(err)
	}
	other, _ := json.Marshal(lease.Value{Instance: instance, Host: "elsewhere", Nonce: instance, Since: time.Now()})
	if _, err := kv.Put(context.Background(), g.key, other); err != nil {
		g.t.Fatal(err)
	}
}

// demotedToStandby says whether the member, once active, stopped its
// loops and mirrors the stream.
func (m *member) demotedToStandby() bool {
	l := m.logs.String()
	i := strings.Index(l, "not the active replica any more")
	return i >= 0 && strings.Contains(l[i:], "standby: mirroring the stream")
}

// callingPipeline is a pipeline whose loop builds a client from the
// replica's state file (restored from the group at a takeover), sends the
// wait the client starts with to pending and calls the shop at url at once.
func callingPipeline(t *testing.T, url string, pending chan<- plenty.Wait) *pipeline {
	return callingPipelineOn(t, url, pending, nil)
}

// callingPipelineOn is callingPipeline with the client's wall clock now
// (nil: time.Now).
func callingPipelineOn(t *testing.T, url string, pending chan<- plenty.Wait, now func() time.Time) *pipeline {
	return &pipeline{onStart: func(ctx context.Context, st *state.Store) {
		c, err := plenty.New(plenty.Config{BaseURL: url, Username: "demo", Password: "demo", Tokens: st, Sessions: st, Waits: st, Now: now})
		if err != nil {
			t.Error(err)
			return
		}
		w, _ := c.Pacer().Pending()
		select {
		case pending <- w:
		default: // a second tenure (the lease lost and taken back under load): the first's is what the test reads
		}
		_, _ = c.SearchOrders(ctx, order.Query{ItemsPerPage: 1})
	}}
}

// TestLostRenewalStopsTheActive: the active replica cannot renew (NATS
// unreachable from it) but goes on running: its gate closes by its own
// deadline, before the lease expires, and its loops stop; the standby
// takes over after that.
func TestLostRenewalStopsTheActive(t *testing.T) {
	g := newGroup(t)
	a := g.activeWithCheckpoint(&pipeline{}, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC))
	b := g.start("b", &pipeline{})
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	var aGateClosed atomic.Int64
	go func() {
		for a.rep.Gate() == nil {
			time.Sleep(time.Millisecond)
		}
		aGateClosed.Store(time.Now().UnixNano())
	}()
	a.nc.Close() // a runs on, cut off
	waitFor(t, "a's loops stopped", func() bool { running, _, _, _ := a.p.state(); return !running && !a.rep.Working() })
	waitFor(t, "b active", b.working)
	_, starts, _, _ := b.p.state()
	if closed := aGateClosed.Load(); closed == 0 || !time.Unix(0, closed).Before(starts[0]) {
		t.Errorf("b started at %v, a's gate closed at %v", starts[0], time.Unix(0, closed))
	}
	if a.rep.Gate() == nil {
		t.Error("a's gate is open without the lease")
	}
}

// TestTakeoverInsideWaitKeepsWait: the active replica waits for the
// service (a Retry-After) when the standby takes over; the wait is in the
// group's checkpoint (record "waits"), the standby's rebuilt client
// restores it and makes no call to the shop before it ends.
func TestTakeoverInsideWaitKeepsWait(t *testing.T) {
	t.Parallel()
	g := newGroup(t)
	srv, firstCall := shopFirstCall(t)

	until := time.Now().Add(4 * time.Second)
	a := g.start("a", &pipeline{})
	waitFor(t, "a active", a.working)
	wait := plenty.Wait{Until: until, Reason: plenty.WaitThrottled, Why: "429 with Retry-After: 4", Measured: time.Now(), Announced: 4 * time.Second}
	if err := plenty.SaveWait(a.store, wait); err != nil { // what a's pacer saves
		t.Fatal(err)
	}
	a.rep.Swept()
	waitFor(t, "a's checkpoint", func() bool { cp, ok := g.checkpoint(); return ok && strings.Contains(string(cp.State), `"waits"`) })

	// b's loop: a client built from its state file (restored from the
	// group's checkpoint at the takeover) that calls the shop at once.
	pending := make(chan plenty.Wait, 1)
	b := g.start("b", callingPipeline(t, srv.URL, pending))
	waitFor(t, "b mirroring", func() bool { return b.rep.Status().Mirroring })
	a.kill()
	waitFor(t, "b active", b.working)
	if w := <-pending; !w.Until.Equal(until) && w.Until.Before(until.Add(-time.Second)) {
		t.Errorf("b's client after the takeover waits until %v, want a's wait until %v", w.Until, until)
	}
	waitFor(t, "b's first call", func() bool { return firstCall.Load() != 0 })
	if at := time.Unix(0, firstCall.Load()); at.Before(until) {
		t.Errorf("b called the shop at %v, inside a's wait (until %v)", at, until)
	}
	if _, _, _, restored := b.p.state(); restored != 1 {
		t.Errorf("b's pipeline rebuilt %d times, want 1", restored)
	}
}

// TestCheckpointThatCannotBeWritten: when the state file cannot give a
// checkpoint, the active says so and goes on working (the lease and the
// loops stay); the next sweep's checkpoint is written once it can.
func TestCheckpointThatCannotBeWritten(t *testing.T) {
	g := newGroup(t)
	wm := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	a := g.activeWithCheckpoint(&pipeline{}, wm)
	before, _ := g.checkpoint()
	a.ckpt.fail.Store(true)
	next := wm.Add(time.Hour)
	if err := a.store.Commit(state.Commit{Watermark: &next}); err != nil {
		t.Fatal(err)
	}
	a.rep.Swept()
	waitFor(t, "the failure logged", func() bool { return strings.Contains(a.logs.String(), "writing the checkpoint failed") })
	if !a.working() {
		t.Error("a stopped working after a checkpoint failed")
	}
	if cp, _ := g.checkpoint(); !cp.Written.Equal(before.Written) {
		t.Errorf("a checkpoint was written: %+v", cp)
	}
	a.ckpt.fail.Store(false)
	a.rep.Swept()
	waitFor(t, "the next checkpoint", func() bool {
		cp, ok := g.checkpoint()
		return ok && strings.Contains(string(cp.State), next.Format(time.RFC3339))
	})
	if _, _, stops, _ := a.p.state(); len(stops) != 0 || !a.working() {
		t.Errorf("a's loops stopped %v times", stops)
	}
}

// shopFirstCall is a simulated shop that notes the time of the first
// request it gets (unix nanos; 0 before).
func shopFirstCall(t *testing.T) (*httptest.Server, *atomic.Int64) {
	sim := plentysim.New(plentysim.Config{Seed: 1})
	sim.Generate(5, time.Now().Add(-time.Hour), time.Now().Add(-time.Minute))
	firstCall := new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		firstCall.CompareAndSwap(0, time.Now().UnixNano())
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, firstCall
}
