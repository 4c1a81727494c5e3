package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/shops"
)

// world is a fleet's surroundings in one test process: one NATS server,
// one multi-tenant simulator over loopback HTTP with a log of every call
// (tenant, User-Agent, start, end), a registry file.
type world struct {
	t        *testing.T
	ns       *server.Server
	natsURL  string
	sim      *plentysim.Tenants
	simURL   string
	registry string
	js       jetstream.JetStream

	mu    sync.Mutex
	calls []plentysim.Call
}

func newWorld(t *testing.T, n int) *world { t.Helper(); return newWorldWith(t, n, nil) }

// newWorldWith is newWorld with the NATS server's users made from the
// registry file (before the server starts), plus "admin" (password
// "admin", no restriction): natsURL then carries admin's credentials.
func newWorldWith(t *testing.T, n int, users func(registry string) []*server.User) *world {
	t.Helper()
	return newWorldSim(t, n, plentysim.Config{}, users)
}

// newWorldSim is newWorldWith with the simulator's configuration.
func newWorldSim(t *testing.T, n int, cfg plentysim.Config, users func(registry string) []*server.User) *world {
	t.Helper()
	w := &world{t: t, sim: plentysim.NewMulti(n, cfg)}
	// Orders of their own in every shop, with ids no other shop uses (see
	// mutate).
	at := time.Now().Add(-time.Hour)
	for i, id := range w.sim.IDs() {
		for k := range ordersPerShop {
			w.sim.Tenant(id).AddOrder(plentysim.Order{ID: int64(1000*(i+1) + k), StatusID: "5", CreatedAt: at, UpdatedAt: at})
		}
	}
	w.sim.SetOnCall(func(c plentysim.Call) {
		w.mu.Lock()
		w.calls = append(w.calls, c)
		w.mu.Unlock()
	})
	srv := httptest.NewServer(w.sim)
	t.Cleanup(srv.Close)
	w.simURL = srv.URL
	var entries []string
	for _, id := range w.sim.IDs() {
		entries = append(entries, fmt.Sprintf(`{"id":%q,"url":%q,"username":"demo","passwordEnv":"SHOP_PW"}`, id, srv.URL+plentysim.TenantPath(id)))
	}
	w.registry = filepath.Join(t.TempDir(), "shops.json")
	if err := os.WriteFile(w.registry, []byte(`{"shops":[`+strings.Join(entries, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if users == nil {
		// ORDERWATCH_NATS_SERVER (make nats-compat) runs the fleet against
		// that release of the server; w.ns is then nil.
		srv := testnats.StartAny(t)
		w.ns, _ = srv.(*server.Server)
		w.natsURL = srv.ClientURL()
	} else {
		us := append(users(w.registry), &server.User{Username: "admin", Password: "admin"})
		w.ns = testnats.StartWith(t, func(o *server.Options) { o.Users = us })
		w.natsURL = strings.Replace(w.ns.ClientURL(), "nats://", "nats://admin:admin@", 1)
	}
	nc := connect(t, w.natsURL)
	t.Cleanup(nc.Close)
	w.js, _ = jetstream.New(nc)
	return w
}

func connect(t *testing.T, url string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// base is the configuration every shop starts from: the defaults of the
// WATCHER_* variables, the lease TTL 9 s.
func base(natsURL string) pipeline.Config {
	return pipeline.Config{
		PlentyAPIVendor: "service", PlentyTimeout: 10 * time.Second,
		NATSURL: natsURL, Stream: "ORDERS", StreamCreate: true, DuplicateWindow: 10 * time.Minute, StreamReplicas: 1,
		SubjectPrefix: "orders", PublishInFlight: 256, OutboxMax: 100000,
		StartFrom: pipeline.StartFrom{Back: 24 * time.Hour},
		CallShare: 0.25, ItemsPerPage: 250, SlicePages: 4, Keyset: "auto", BadEntries: "quarantine",
		Lease: true, LeaseTTL: 9 * time.Second, LeaseBucket: "orderwatch",
		HTTPAddr: "127.0.0.1:0", LogFormat: "text", LogLevel: "error", ShutdownTimeout: 3 * time.Second,
	}
}

// member is one replica of the fleet running in the test process.
type member struct {
	name   string
	f      *Fleet
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan struct{}
	err    error // what Run returned (once done is closed)
}

func (w *world) start(name string) *member {
	w.t.Helper()
	return w.startWith(name, map[string]string{"SHOP_PW": "demo"})
}

// startWith starts a member whose environment (the shops' passwordEnv)
// is env.
func (w *world) startWith(name string, env map[string]string) *member {
	w.t.Helper()
	return w.startMember(name, env, nil)
}

// startMember is startWith with the member's wall clock (nil: time.Now).
func (w *world) startMember(name string, env map[string]string, now func() time.Time) *member {
	w.t.Helper()
	nc := connect(w.t, w.natsURL)
	reg := prometheus.NewRegistry()
	f, err := New(Config{
		NC: nc, Instance: name, Host: "test", Base: base(w.natsURL), StateDir: filepath.Join(w.t.TempDir(), name),
		Getenv: func(k string) string { return env[k] }, Now: now,
		Logger: testLogger(name), Registerer: reg, Gatherer: reg, Version: "test",
	})
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, f: f, nc: nc, cancel: cancel, done: make(chan struct{})}
	watcher := shops.NewWatcher(w.registry, f.RegistryOptions(nil))
	var wg sync.WaitGroup
	wg.Go(func() { watcher.Run(ctx, f.Apply) })
	wg.Go(func() { m.err = f.Run(ctx); cancel() }) // a refused member ends its registry's watcher too
	go func() { wg.Wait(); nc.Close(); close(m.done) }()
	w.t.Cleanup(func() { m.cancel(); <-m.done })
	return m
}

// kill ends a member as kill -9 would for NATS and the shops: its
// connection drops (no release, no withdrawal: its leases and its
// announcement expire on their own) and its loops end.
func (m *member) kill() {
	m.nc.Close()
	m.cancel()
}

// active are the shops a member runs as the active replica.
func (m *member) active() []string {
	var out []string
	for _, s := range m.f.Report().Shops {
		if s.State == StateActive {
			out = append(out, s.ID)
		}
	}
	return out
}

// stable says whether every shop is active on exactly one member after a
// verified sweep (its first sync done), each member within the fair
// share, and every member ready.
func stable(ms []*member, shopCount int) (bool, string) {
	seen := map[string]string{}
	share := Share(shopCount, len(ms))
	for _, m := range ms {
		rep := m.f.Report()
		if !rep.Ready {
			return false, m.name + " not ready: " + rep.Why
		}
		var act []string
		for _, s := range rep.Shops {
			if s.State == StateActive && s.Reason == "ok" {
				act = append(act, s.ID)
			}
		}
		if len(act) > share {
			return false, fmt.Sprintf("%s holds %d > %d", m.name, len(act), share)
		}
		for _, id := range act {
			if other, ok := seen[id]; ok {
				return false, id + " active on " + other + " and " + m.name
			}
			seen[id] = m.name
		}
	}
	return len(seen) == shopCount, fmt.Sprintf("%d of %d shops active", len(seen), shopCount)
}

func waitStable(t *testing.T, ms []*member, n int, limit time.Duration) {
	t.Helper()
	var why string
	testnats.WaitForEvery(t, "a stable fleet", limit, 100*time.Millisecond, func() bool {
		var ok bool
		ok, why = stable(ms, n)
		return ok
	})
	_ = why
}

// change is one status change made in a shop.
type change struct {
	shop  string
	order int64
	to    string
}

// ordersPerShop are the orders of each simulated shop.
const ordersPerShop = 6

// mutate changes the status of the k-th order of every shop. Order ids
// differ between shops: the event ids, which do not name the shop, cannot
// collide in the shared stream's duplicate window (docs/fleet.md).
func (w *world) mutate(k int) []change {
	w.t.Helper()
	var out []change
	for _, id := range w.sim.IDs() {
		s := w.sim.Tenant(id)
		o := s.Orders()[k%len(s.Orders())]
		to := "6"
		if o.StatusID == "6" {
			to = "7"
		}
		if _, err := s.SetStatus(o.ID, to); err != nil {
			w.t.Fatal(err)
		}
		out = append(out, change{shop: id, order: o.ID, to: to})
	}
	return out
}

// events reads the whole stream: the events per shop.
func (w *world) events() map[string][]diff.EventData {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := w.js.Stream(ctx, "ORDERS")
	if err != nil {
		w.t.Fatal(err)
	}
	// A plain consumer without acks, not an ordered one: an ordered
	// consumer whose creation times out (a loaded machine) retries for ever.
	cons, err := s.CreateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, InactiveThreshold: time.Minute})
	if err != nil {
		w.t.Fatal(err)
	}
	defer func() { _ = s.DeleteConsumer(context.Background(), cons.CachedInfo().Name) }()
	out := map[string][]diff.EventData{}
	for {
		batch, err := cons.FetchNoWait(500)
		if err != nil {
			w.t.Fatal(err)
		}
		n := 0
		for msg := range batch.Messages() {
			n++
			shop := strings.Split(msg.Subject(), ".")[1]
			ev, err := diff.DecodeEvent(msg.Data())
			if err != nil {
				w.t.Fatal(err)
			}
			out[shop] = append(out[shop], ev)
		}
		if n == 0 {
			return out
		}
	}
}

// exactly says whether the stream holds one status_changed event for each
// change and nothing else (no first-sync event, no duplicate).
func exactly(got map[string][]diff.EventData, want []change) (bool, string) {
	wantBy := map[string][]string{}
	for _, c := range want {
		wantBy[c.shop] = append(wantBy[c.shop], fmt.Sprintf("%s %d -> %s", diff.StatusChanged, c.order, c.to))
	}
	for shop := range got {
		if _, ok := wantBy[shop]; !ok {
			wantBy[shop] = nil
		}
	}
	for shop, ws := range wantBy {
		var gs []string
		for _, e := range got[shop] {
			gs = append(gs, fmt.Sprintf("%s %d -> %s", e.Type, e.OrderID, e.After.StatusID.Canonical()))
		}
		slices.Sort(gs)
		slices.Sort(ws)
		if !slices.Equal(gs, ws) {
			return false, fmt.Sprintf("shop %s: events %q, want %q", shop, gs, ws)
		}
	}
	return true, ""
}

func (w *world) waitEvents(want []change, limit time.Duration) {
	w.t.Helper()
	var why string
	end := time.Now().Add(limit)
	for {
		ok, msg := exactly(w.events(), want)
		if ok {
			return
		}
		why = msg
		if time.Now().After(end) {
			w.t.Fatalf("events after %v: %s", limit, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// callsSince is the simulator's log of calls from t on, by shop, in the
// order they started.
func (w *world) callsSince(from time.Time) map[string][]plentysim.Call {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]plentysim.Call{}
	for _, c := range w.calls {
		if !c.Start.Before(from) {
			out[c.Tenant] = append(out[c.Tenant], c)
		}
	}
	for _, cs := range out {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Start.Before(cs[j].Start) })
	}
	return out
}

// agentMember is the member a User-Agent names: "orderwatch/<version>
// (<instance>)".
func agentMember(agent string) string {
	_, inner, _ := strings.Cut(agent, "(")
	return strings.TrimSuffix(inner, ")")
}

// tenures splits a shop's calls (in the order they started) into runs of
// one member; it fails the test when a member's call started before the
// calls of the member before it had all ended: two members calling one
// shop at once.
func tenures(t *testing.T, shop string, cs []plentysim.Call) []string {
	t.Helper()
	out, overlaps := splitTenures(shop, cs)
	for _, o := range overlaps {
		t.Error(o)
	}
	return out
}

// splitTenures is tenures without a test: the runs and the overlapping
// calls.
func splitTenures(shop string, cs []plentysim.Call) (out, overlaps []string) {
	var end time.Time // the latest end of the current run's calls
	for _, c := range cs {
		m := agentMember(c.Agent)
		if len(out) > 0 && out[len(out)-1] != m {
			if c.Start.Before(end) {
				overlaps = append(overlaps, fmt.Sprintf("shop %s called by %s at %s while a call by %s ended only at %s", shop, m, c.Start.Format(time.StampMicro), out[len(out)-1], end.Format(time.StampMicro)))
			}
			end = time.Time{}
		}
		if len(out) == 0 || out[len(out)-1] != m {
			out = append(out, m)
		}
		if c.End.After(end) {
			end = c.End
		}
	}
	return out, overlaps
}

// TestFleetMemberKilled: three members share twelve shops, balanced; one
// is killed (its connection dropped, no lease released); the two others
// take each of its shops over, restoring the shop's state from the group
// (no first sync: a change made while nobody held the shop is published
// once, nothing else), and no shop is ever called by two members at once.
func TestFleetMemberKilled(t *testing.T) {
	t.Parallel()
	const n = 12
	w := newWorld(t, n)
	ms := []*member{w.start("m0"), w.start("m1"), w.start("m2")}
	waitStable(t, ms, n, 60*time.Second)
	before := w.mutate(0)
	w.waitEvents(before, 30*time.Second)

	victim, survivors := busiest(ms, (*member).active)
	moved := victim.active()
	killedAt := time.Now()
	victim.kill()
	after := w.mutate(1) // while the victim's shops have no holder
	waitStable(t, survivors, n, 60*time.Second)
	w.waitEvents(append(before, after...), 30*time.Second)

	// Each moved shop's first call by a survivor, after the kill.
	calls := w.callsSince(killedAt)
	var took []time.Duration
	for _, id := range moved {
		ts := tenures(t, id, calls[id])
		if len(ts) == 0 || ts[len(ts)-1] == victim.name || slices.Contains(ts[1:], victim.name) {
			t.Errorf("shop %s after the kill called by %v", id, ts)
			continue
		}
		for _, c := range calls[id] {
			if agentMember(c.Agent) != victim.name {
				took = append(took, c.Start.Sub(killedAt))
				break
			}
		}
	}
	for id, cs := range calls {
		if !slices.Contains(moved, id) {
			if ts := tenures(t, id, cs); len(ts) != 1 {
				t.Errorf("shop %s of a survivor moved after the kill: %v", id, ts)
			}
		}
	}
	slices.Sort(took)
	if len(took) != len(moved) || len(moved) == 0 {
		t.Fatalf("%d of the %d shops of %s called by a survivor", len(took), len(moved), victim.name)
	}
	t.Logf("%d shops of the killed member: first call on a survivor after %v (min) .. %v (max); lease TTL 9 s",
		len(moved), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))

	// Over the whole run, the start included: no overlap of two members'
	// calls on any shop.
	for id, cs := range w.callsSince(time.Time{}) {
		tenures(t, id, cs)
	}
}

// TestFleetRegistryLive: a shop added to the running fleet's registry is
// taken by a member and its events published; a removed shop is given up
// (its lease released) and no longer called; an invalid entry is reported
// and leaves the others running.
func TestFleetRegistryLive(t *testing.T) {
	t.Parallel()
	const n = 4
	w := newWorld(t, n)
	all := w.sim.IDs()
	write := func(ids []string, extra string) {
		var entries []string
		for _, id := range ids {
			entries = append(entries, fmt.Sprintf(`{"id":%q,"url":%q,"username":"demo","passwordEnv":"SHOP_PW"}`, id, w.simURL+plentysim.TenantPath(id)))
		}
		if extra != "" {
			entries = append(entries, extra)
		}
		tmp := w.registry + ".tmp"
		if err := os.WriteFile(tmp, []byte(`{"shops":[`+strings.Join(entries, ",")+`]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, w.registry); err != nil {
			t.Fatal(err)
		}
	}
	write(all[:3], "")
	ms := []*member{w.start("m0"), w.start("m1")}
	waitStable(t, ms, 3, 60*time.Second)

	write(all, `{"id":"broken","url":"http://x","username":"demo","password":"in clear"}`)
	waitStable(t, ms, 4, 60*time.Second)
	for _, m := range ms {
		rep := m.f.Report()
		if len(rep.Invalid) != 1 || !strings.Contains(rep.Invalid[0], `"password" in clear`) || !rep.Ready {
			t.Errorf("%s: invalid entries %q, ready %v", m.name, rep.Invalid, rep.Ready)
		}
	}
	changes := w.mutate(0)
	w.waitEvents(changes, 30*time.Second)

	removed := all[0]
	write(all[1:], "")
	waitStable(t, ms, 3, 60*time.Second)
	testnats.WaitForEvery(t, "the removed shop's lease released", 30*time.Second, 100*time.Millisecond, func() bool {
		kv, err := w.js.KeyValue(context.Background(), "orderwatch_lease")
		if err != nil {
			return false
		}
		// The shop's own key (its registry id): the URL's key was never
		// written, so this check could not fail.
		_, err = kv.Get(context.Background(), lease.Key(removed, "ORDERS"))
		return err != nil
	})
	since := time.Now()
	w.mutate(1)
	w.waitEvents(append(changes, changesExcept(w, removed)...), 30*time.Second)
	if cs := w.callsSince(since)[removed]; len(cs) != 0 {
		t.Errorf("the removed shop was called %d times after its lease was released", len(cs))
	}
}

// changesExcept are the changes of mutate(1) for every shop but one, as
// the simulator recorded them (mutate was called already).
func changesExcept(w *world, skip string) []change {
	var out []change
	for _, id := range w.sim.IDs() {
		if id == skip {
			continue
		}
		s := w.sim.Tenant(id)
		o := s.Orders()[1%len(s.Orders())]
		out = append(out, change{shop: id, order: o.ID, to: o.StatusID})
	}
	return out
}

// firstCalls is, for each shop, how long after `from` its first call by
// member `by` started (shops it did not call are left out).
func (w *world) firstCalls(from time.Time, by string, shops []string) []time.Duration {
	calls := w.callsSince(from)
	var out []time.Duration
	for _, id := range shops {
		for _, c := range calls[id] {
			if agentMember(c.Agent) == by {
				out = append(out, c.Start.Sub(from))
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestFleetMemberJoinsAndLeaves: a member alone runs every shop; a second
// member joins and the first gives shops up one at a time until both hold
// their fair share; changes made meanwhile are published once each. Then
// the second stops gracefully (its leases released): the first takes its
// shops at once, well before a lease would have expired. No shop is ever
// called by two members at once.
func TestFleetMemberJoinsAndLeaves(t *testing.T) {
	t.Parallel()
	const n = 8
	w := newWorld(t, n)
	m0 := w.start("m0")
	waitStable(t, []*member{m0}, n, 60*time.Second)
	changes := w.mutate(0)
	w.waitEvents(changes, 30*time.Second)

	joined := time.Now()
	m1 := w.start("m1")
	changes = append(changes, w.mutate(1)...) // while shops move
	waitStable(t, []*member{m0, m1}, n, 90*time.Second)
	balanced := time.Since(joined)
	w.waitEvents(changes, 30*time.Second)
	if got := len(m1.active()); got != n/2 {
		t.Errorf("the member that joined holds %d shops, want %d", got, n/2)
	}
	t.Logf("a member joined: %d shops moved one at a time, balanced after %v", n/2, balanced.Round(time.Millisecond))

	leaving := m1.active()
	left := time.Now()
	m1.cancel()
	<-m1.done
	changes = append(changes, w.mutate(2)...)
	waitStable(t, []*member{m0}, n, 60*time.Second)
	w.waitEvents(changes, 30*time.Second)
	took := w.firstCalls(left, "m0", leaving)
	if len(took) != len(leaving) {
		t.Fatalf("%d of the %d shops of the member that left called by the other", len(took), len(leaving))
	}
	t.Logf("a member left gracefully: its %d shops' first call on the other after %v .. %v", len(took), took[0].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	for id, cs := range w.callsSince(time.Time{}) {
		tenures(t, id, cs)
	}
}

func testLogger(name string) *slog.Logger {
	if os.Getenv("FLEET_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("member", name)
}

// TestFleetShopStormIsolated: one shop of a member answers slowly, with
// server errors and a tiny throttle quota; the member's other shops still
// publish each change once, and the storm's shop is called only by its
// own pipeline (its own session, budget and waits).
func TestFleetShopStormIsolated(t *testing.T) {
	const n = 4
	w := newWorld(t, n)
	m := w.start("m0")
	waitStable(t, []*member{m}, n, 60*time.Second)
	storm := w.sim.Tenant("shop-001")
	storm.SetFaults(plentysim.Faults{Latency: 2 * time.Second, ServerErrorRate: 0.5})
	storm.SetLimits(plentysim.Limits{ShortLimit: 3})
	changes := w.mutate(0)
	var quiet []change
	for _, c := range changes {
		if c.shop != "shop-001" {
			quiet = append(quiet, c)
		}
	}
	// The quiet shops' events, exactly; the storm's shop may or may not
	// have published its own yet.
	testnats.WaitForEvery(t, "the quiet shops' events", 30*time.Second, 200*time.Millisecond, func() bool {
		got := w.events()
		delete(got, "shop-001")
		ok, _ := exactly(got, quiet)
		return ok
	})
	// The storm's calls take 2 s each: the quiet shops may be done before
	// one of them was faulted or throttled.
	testnats.WaitForEvery(t, "the storm to hit its shop", 60*time.Second, 100*time.Millisecond, func() bool {
		st := storm.Stats()
		return st.FaultsInjected != 0 || st.Throttled429 != 0
	})
	for _, id := range w.sim.IDs()[1:] {
		if st := w.sim.Tenant(id).Stats(); st.Throttled429 != 0 || st.FaultsInjected != 0 {
			t.Errorf("%s throttled or faulted: %+v", id, st)
		}
	}
}

// busiest is the member running the most shops, and the others.
func busiest[M comparable](ms []M, active func(M) []string) (M, []M) {
	victim := ms[0]
	for _, m := range ms[1:] {
		if len(active(m)) > len(active(victim)) {
			victim = m
		}
	}
	var others []M
	for _, m := range ms {
		if m != victim {
			others = append(others, m)
		}
	}
	return victim, others
}
