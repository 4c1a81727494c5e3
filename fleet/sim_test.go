package fleet

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/shops"
)

var (
	simLong    = flag.Bool("fleet-sim-long", false, "TestFleetRandomized: several seeds, minutes each (make fleet-sim-long)")
	simSeed    = flag.Uint64("fleet-sim-seed", 0, "TestFleetRandomized: replay this seed (0: a new one)")
	simMoves   = flag.Int("fleet-sim-moves", 0, "TestFleetRandomized: moves per seed (0: the mode's)")
	simBuckets = flag.Bool("fleet-sim-buckets", true, "TestFleetRandomized: delete the lease and checkpoint buckets too (false: the members bucket only)")
)

// heldWithin is the promise the simulation checks: a shop that some live,
// unpaused member can run (its registry names it, its environment has the
// password) is held by some member within this time.
const heldWithin = 30 * time.Second

// TestFleetRandomized is the fleet's seeded randomized simulation: members
// join, leave, are killed or paused (their NATS connection frozen, as a
// stopped process or a partition), the registry is edited (shops removed,
// added back, changed) with members reading it late, members lack a
// shop's password (registries that differ), the members bucket is
// deleted; orders change all along. It asserts: no two members call one
// shop at once, no member calls a shop whose lease it does not hold, every
// shop some member can run is held within heldWithin, and the stream holds
// exactly one event per change (nothing lost or doubled). The seed draws
// the moves and their timing; the goroutines and NATS are real, so a
// replay repeats the moves, not every interleaving.
func TestFleetRandomized(t *testing.T) {
	seeds, moves := []uint64{*simSeed}, 14
	if *simLong {
		moves = 120
		if *simSeed == 0 {
			seeds = []uint64{0, 0, 0, 0, 0}
		}
	}
	if *simMoves > 0 {
		moves = *simMoves
	}
	total := 0
	for i, seed := range seeds {
		if seed == 0 {
			seed = uint64(time.Now().UnixNano()) + uint64(i)
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			s := newSim(t, seed, 4)
			defer func() {
				if t.Failed() {
					t.Logf("replay: go test -race ./fleet -run 'TestFleetRandomized' -v -args -fleet-sim-seed=%d -fleet-sim-moves=%d\nmoves:\n%s\nlogins:\n%s", seed, moves, strings.Join(s.log, "\n"), s.loginLog())
				}
			}()
			s.run(moves)
			total += moves
			t.Logf("seed %d: %d moves, %d changes, %d members started; %s; %s", seed, moves, len(s.changes), s.started, s.kinds(), s.sessions())
		})
	}
	t.Logf("%d seeds, %d moves in all", len(seeds), total)
}

// kinds counts the moves made by kind.
func (s *sim) kinds() string {
	var out []string
	for _, k := range []string{"join", "leave", "kill", "pause", "resume", "registry:", "reads it late", "lacking", "delete the bucket orderwatch_fleet", "delete the bucket orderwatch_lease", "delete the bucket orderwatch_checkpoint"} {
		n := 0
		for _, l := range s.log {
			if strings.Contains(l, " "+k) {
				n++
			}
		}
		out = append(out, fmt.Sprintf("%s %d", strings.TrimSuffix(strings.TrimPrefix(k, "delete the bucket "), ":"), n))
	}
	return strings.Join(out, ", ")
}

// sessions says how many logins each shop's members made (each opens a
// session the service keeps for a day; the session moves with the shop).
func (s *sim) sessions() string {
	var out []string
	for _, id := range s.ids {
		st := s.w.sim.Tenant(id).Stats()
		out = append(out, fmt.Sprintf("%s %d logins (%d sessions allowed)", id, st.LoginCalls, s.sessionsAllowed[id]))
	}
	return strings.Join(out, ", ")
}

// loginLog lists each shop's logins: member, time into the run, status.
func (s *sim) loginLog() string {
	calls := s.w.callsSince(time.Time{})
	var out []string
	for _, id := range s.ids {
		var ls []string
		for _, c := range calls[id] {
			if strings.HasSuffix(c.Path, "/login") {
				ls = append(ls, fmt.Sprintf("%s %.1fs %d", agentMember(c.Agent), c.Start.Sub(s.t0).Seconds(), c.Status))
			}
		}
		out = append(out, id+": "+strings.Join(ls, ", "))
	}
	return strings.Join(out, "\n")
}

// sim is one run of the simulation.
type sim struct {
	t   *testing.T
	w   *world
	rng *rand.Rand
	ids []string

	present  map[string]bool       // the registry's shops now
	share    map[string]float64    // each shop's callShare (edits change it)
	members  map[string]*simMember // live members by name
	started  int                   // members started (names are never reused)
	changes  []change              // every change made in the simulator
	nextOrd  map[string]int        // the next order of each shop to change
	holders  map[string][]holderAt // lease key -> holder timeline (the test's own watch)
	pending  []func()              // registry updates a member reads late
	freeAt   map[string]time.Time  // shop -> seen without a holder while runnable, since
	failures []string              // liveness failures
	log      []string              // the moves made
	mu       sync.Mutex            // guards holders
	stop     context.CancelFunc    // ends the test's lease watch and the monitor
	done     chan struct{}         // closed when the monitor ended
	t0       time.Time
	rewatch  chan struct{}                // the lease bucket was deleted: watch it again
	snapshot atomic.Pointer[[]*simMember] // the live members, for the monitor

	// sessionsAllowed is each shop's session limit on the simulator (see
	// deleteBucket); exposed are the shops whose holder at a deletion of
	// the checkpoint bucket had not written it again yet (see exposedTo).
	sessionsAllowed map[string]int
	exposed         []exposure
}

type holderAt struct {
	at     time.Time
	holder string // "" : released or expired
}

type simMember struct {
	*member
	registry string // its own copy of the registry file
	proxy    *proxy
	lacks    map[string]bool
	paused   atomic.Bool
	killed   atomic.Bool // its connection closed: it is not waited for (see join)
}

// simOrders are the orders of each simulated shop: every change moves a
// fresh order from 5 to 6, so each is one event whatever the timing.
const simOrders = 200

func newSim(t *testing.T, seed uint64, shopsN int) *sim {
	// The service's default of 3 concurrent sessions: a member that takes
	// a shop goes on with the session the group's checkpoint hands over
	// (plenty's record session.sealed), so a shop moved far more often
	// than 3 times within a token's life is never refused a login.
	w := newWorldSim(t, shopsN, plentysim.Config{}, nil)
	s := &sim{
		t: t, w: w, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), ids: w.sim.IDs(),
		present: map[string]bool{}, share: map[string]float64{}, members: map[string]*simMember{},
		nextOrd: map[string]int{}, holders: map[string][]holderAt{}, freeAt: map[string]time.Time{},
		done: make(chan struct{}), t0: time.Now(), rewatch: make(chan struct{}, 1), sessionsAllowed: map[string]int{},
	}
	at := time.Now().Add(-time.Hour)
	for i, id := range s.ids {
		s.present[id], s.share[id], s.sessionsAllowed[id] = true, 0.25, 3
		for k := range simOrders {
			w.sim.Tenant(id).AddOrder(plentysim.Order{ID: int64(100000*(i+1) + k), StatusID: "5", CreatedAt: at, UpdatedAt: at})
		}
	}
	return s
}

// registryJSON is the registry of the shops present now.
func (s *sim) registryJSON() []byte {
	var entries []string
	for _, id := range s.ids {
		if s.present[id] {
			entries = append(entries, fmt.Sprintf(`{"id":%q,"url":%q,"username":"demo","passwordEnv":%q,"callShare":%v}`,
				id, s.w.simURL+plentysim.TenantPath(id), pwEnv(id), s.share[id]))
		}
	}
	return []byte(`{"shops":[` + strings.Join(entries, ",") + `]}`)
}

func pwEnv(id string) string { return "PW_" + strings.ReplaceAll(strings.ToUpper(id), "-", "_") }

func writeFile(t *testing.T, path string, data []byte) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Error(err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Error(err)
	}
}

func (s *sim) note(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("%6.1fs ", time.Since(s.t0).Seconds())+fmt.Sprintf(format, args...))
}

// run makes the moves, then lets the fleet settle and checks.
func (s *sim) run(moves int) {
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	s.join(false)
	s.join(false)
	go s.watchLeases(ctx)
	// Changes count from the end of every shop's first sync (the orders
	// it reads then are its baseline, not changes).
	s.waitActive("started")
	go s.monitor(ctx)
	for range moves {
		time.Sleep(time.Duration(300+s.rng.IntN(1200)) * time.Millisecond)
		s.move()
	}
	s.settle()
	cancel()
	<-s.done
	s.check()
}

// move makes one random move.
func (s *sim) move() {
	for len(s.pending) > 0 && s.rng.IntN(3) == 0 { // a late reader catches up
		s.pending[0]()
		s.pending = s.pending[1:]
	}
	s.change()
	live := s.live()
	switch r := s.rng.IntN(100); {
	case r < 18 && len(live) < 4:
		s.join(s.rng.IntN(4) == 0)
	case r < 28 && len(live) > 1:
		m := live[s.rng.IntN(len(live))]
		s.note("leave %s", m.name)
		s.gone(m)
		m.paused.Store(false)
		m.proxy.resume()
		m.cancel()
	case r < 40 && len(live) > 1:
		m := live[s.rng.IntN(len(live))]
		s.note("kill %s", m.name)
		s.exposedTo(m.name)
		s.gone(m)
		m.killed.Store(true)
		m.kill()
		m.proxy.close()
	case r < 52:
		m := live[s.rng.IntN(len(live))]
		if m.paused.Load() {
			s.note("resume %s", m.name)
			m.paused.Store(false)
			m.proxy.resume()
		} else {
			s.note("pause %s", m.name)
			s.exposedTo(m.name)
			m.paused.Store(true)
			m.proxy.pause()
		}
	case r < 80:
		s.editRegistry()
	case r < 85:
		s.deleteBucket("orderwatch_fleet")
	case r < 88 && *simBuckets:
		s.deleteBucket([]string{"orderwatch_lease", "orderwatch_checkpoint"}[s.rng.IntN(2)])
	default:
		s.note("nothing")
	}
}

// deleteBucket deletes a KV bucket of the fleet.
func (s *sim) deleteBucket(name string) {
	s.note("delete the bucket %s", name)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.w.js.DeleteKeyValue(ctx, name); err != nil {
		s.note("  (%v)", err)
	}
	if name == "orderwatch_checkpoint" {
		s.checkpointsDeleted()
	}
	if name == "orderwatch_lease" {
		// Who holds what is unknown until the test's watch is on the
		// bucket again (calls then are judged by the overlap check only).
		s.mu.Lock()
		for key, tl := range s.holders {
			s.holders[key] = append(tl, holderAt{at: time.Now(), holder: unknownHolder})
		}
		s.mu.Unlock()
		select {
		case s.rewatch <- struct{}{}:
		default:
		}
	}
}

// exposure is a shop whose holder may not have written the deleted
// checkpoint bucket again (its limits and checkpoint, which carry the
// shop's sealed session) before until.
type exposure struct {
	shop, holder string
	until        time.Time
}

// rewriteWithin bounds when a shop's live active writes its limits and
// checkpoint again after the checkpoint bucket was deleted: at its next
// sweep's end, or within two CheckpointEvery (10 s) when none ends.
const rewriteWithin = 20 * time.Second

// checkpointsDeleted: the checkpoints and limits keys carried the shops'
// sessions (sealed). Each shop's live active writes them again from its
// state file (no login); a member that takes a shop before that, from a
// holder cut off from NATS (killed, paused) or in the middle of a
// takeover, logs in (docs/fleet.md, Known limits), and the service keeps
// the earlier session for a day. One more session for such a shop only,
// so that every other cause of a login runs into the limit.
func (s *sim) checkpointsDeleted() {
	now := time.Now()
	for _, id := range s.ids {
		holder, since := s.holderSince(lease.Key(id, "ORDERS"), now)
		m, live := s.members[holder]
		if !live || m.paused.Load() || now.Sub(since) < rewriteWithin {
			s.allowOneMore(id, "holder "+holder+" cut off or taking over at the deletion")
			continue
		}
		s.exposed = append(s.exposed, exposure{shop: id, holder: holder, until: now.Add(rewriteWithin)})
	}
}

// exposedTo: the member is killed or paused; a shop it held at a deletion
// of the checkpoint bucket within rewriteWithin may have lost its session.
func (s *sim) exposedTo(member string) {
	now := time.Now()
	s.exposed = slices.DeleteFunc(s.exposed, func(e exposure) bool {
		if !now.Before(e.until) {
			return true
		}
		if e.holder != member {
			return false
		}
		s.allowOneMore(e.shop, "holder "+member+" cut off after the deletion")
		return true
	})
}

func (s *sim) allowOneMore(id, why string) {
	s.sessionsAllowed[id]++
	s.w.sim.Tenant(id).SetMaxSessions(s.sessionsAllowed[id])
	s.note("  %s: %d sessions allowed (%s)", id, s.sessionsAllowed[id], why)
}

// unknownHolder marks a lease timeline where the test's watch lost sight.
const unknownHolder = "?"

// change moves a fresh order of a random shop from 5 to 6.
func (s *sim) change() {
	id := s.ids[s.rng.IntN(len(s.ids))]
	k := s.nextOrd[id]
	if k >= simOrders {
		return
	}
	s.nextOrd[id]++
	ten := s.w.sim.Tenant(id)
	o := ten.Orders()[k]
	if _, err := ten.SetStatus(o.ID, "6"); err != nil {
		s.t.Fatal(err)
	}
	s.changes = append(s.changes, change{shop: id, order: o.ID, to: "6"})
}

// editRegistry removes a shop, adds a removed one back or changes one's
// callShare; each live member reads the new registry at once, or one of
// them late.
func (s *sim) editRegistry() {
	id := s.ids[s.rng.IntN(len(s.ids))]
	switch {
	case s.present[id] && s.rng.IntN(2) == 0:
		s.present[id] = false
		s.note("registry: remove %s", id)
	case s.present[id]:
		s.share[id] = map[float64]float64{0.25: 0.3, 0.3: 0.25}[s.share[id]]
		s.note("registry: change %s (callShare %v)", id, s.share[id])
	default:
		s.present[id] = true
		s.note("registry: add %s back", id)
	}
	data := s.registryJSON()
	live := s.live()
	late := -1
	if s.rng.IntN(3) == 0 {
		late = s.rng.IntN(len(live))
	}
	for i, m := range live {
		if i == late {
			s.note("  %s reads it late", m.name)
			path := m.registry
			s.pending = append(s.pending, func() { writeFile(s.t, path, data) })
			continue
		}
		writeFile(s.t, m.registry, data)
	}
}

// gone takes a member out of the live ones.
func (s *sim) gone(m *simMember) {
	delete(s.members, m.name)
	live := s.live()
	s.snapshot.Store(&live)
}

// live are the live members, by name.
func (s *sim) live() []*simMember {
	var out []*simMember
	for _, name := range slices.Sorted(mapsKeys(s.members)) {
		out = append(out, s.members[name])
	}
	return out
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// join starts a member (a name never used before) on a proxy of its own
// to NATS; lacking: without the password of one shop.
func (s *sim) join(lacking bool) *simMember {
	name := fmt.Sprintf("m%d", s.started)
	s.started++
	lacks := map[string]bool{}
	if lacking {
		lacks[s.ids[s.rng.IntN(len(s.ids))]] = true
	}
	s.note("join %s%s", name, lacksText(lacks))
	env := map[string]string{}
	for _, id := range s.ids {
		if !lacks[id] {
			env[pwEnv(id)] = "demo"
		}
	}
	p := newProxy(s.t, strings.TrimPrefix(s.w.natsURL, "nats://"))
	dir := s.t.TempDir()
	registry := filepath.Join(dir, "shops.json")
	writeFile(s.t, registry, s.registryJSON())
	nc := connect(s.t, "nats://"+p.addr())
	reg := prometheus.NewRegistry()
	b := base(s.w.natsURL)
	b.LeaseTTL = 3 * time.Second
	f, err := New(Config{
		NC: nc, Instance: name, Host: "sim", Base: b, StateDir: filepath.Join(dir, "state"),
		MemberTTL: 3 * time.Second, OrphanGrace: 2 * time.Second, Tick: 500 * time.Millisecond,
		Getenv: func(k string) string { return env[k] }, Logger: testLogger(name), Registerer: reg, Gatherer: reg, Version: "test",
	})
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{name: name, f: f, nc: nc, cancel: cancel, done: make(chan struct{})}
	watcher := shops.NewWatcher(registry, f.RegistryOptions(nil))
	var wg sync.WaitGroup
	wg.Go(func() { watcher.Run(ctx, f.Apply) })
	wg.Go(func() { m.err = f.Run(ctx); cancel() })
	go func() { wg.Wait(); nc.Close(); close(m.done) }()
	sm := &simMember{member: m, registry: registry, proxy: p, lacks: lacks}
	s.t.Cleanup(func() {
		m.cancel()
		p.resume()
		// A killed member is dead: its shutdown is no part of the model,
		// and a standby pipeline whose connection was closed first may
		// never end (mirror: the ordered consumer's reset retries for
		// ever, docs/fleet.md "Known limits").
		if !sm.killed.Load() {
			<-m.done
		}
		p.close()
	})
	s.members[name] = sm
	live := s.live()
	s.snapshot.Store(&live)
	return sm
}

func lacksText(lacks map[string]bool) string {
	if len(lacks) == 0 {
		return ""
	}
	return " lacking the password of " + strings.Join(slices.Sorted(mapsKeys(lacks)), ", ")
}

// watchLeases records every change of holder of every shop's lease.
func (s *sim) watchLeases(ctx context.Context) {
	for ctx.Err() == nil {
		kv, err := s.w.js.KeyValue(ctx, "orderwatch_lease")
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		w, err := kv.WatchAll(ctx, jetstream.IncludeHistory())
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		s.follow(ctx, w)
		_ = w.Stop()
	}
}

// follow records the watch's updates until ctx ends or the bucket is
// deleted (rewatch).
func (s *sim) follow(ctx context.Context, w jetstream.KeyWatcher) {
	for {
		var e jetstream.KeyValueEntry
		var ok bool
		select {
		case <-ctx.Done():
			return
		case <-s.rewatch:
			return
		case e, ok = <-w.Updates():
		}
		if !ok {
			return
		}
		if e == nil {
			continue
		}
		holder := ""
		var v lease.Value
		if e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &v) == nil {
			holder = v.Instance
		}
		s.mu.Lock()
		tl := s.holders[e.Key()]
		if len(tl) == 0 || tl[len(tl)-1].holder != holder {
			// When the server stored the change, not when the watch handed
			// it (later on a loaded machine, and a new holder calls the
			// shop as soon as its write is acknowledged); never before the
			// last change recorded (a watch started again replays).
			at := e.Created()
			if len(tl) > 0 && at.Before(tl[len(tl)-1].at) {
				at = tl[len(tl)-1].at
			}
			s.holders[e.Key()] = append(tl, holderAt{at: at, holder: holder})
		}
		s.mu.Unlock()
	}
}

// holderSince is the recorded holder of a lease key at a time and since
// when it holds it.
func (s *sim) holderSince(key string, at time.Time) (h string, since time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.holders[key] {
		if e.at.After(at) {
			break
		}
		h, since = e.holder, e.at
	}
	return h, since
}

// holderAt is the recorded holder of a lease key at a time.
func (s *sim) holderOf(key string, at time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := ""
	for _, e := range s.holders[key] {
		if e.at.After(at) {
			break
		}
		h = e.holder
	}
	return h
}

// runnable: a live, unpaused member can run the shop (its registry file
// names it: checked by its report; its environment has the password).
func (s *sim) runnable(m *simMember, id string) bool {
	if m.paused.Load() || m.lacks[id] {
		return false
	}
	m.f.mu.Lock()
	_, ok := m.f.registry[id]
	bound := m.f.bound
	m.f.mu.Unlock()
	return ok && bound
}

// monitor checks the liveness promise every 250 ms.
func (s *sim) monitor(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.checkHeld()
	}
}

func (s *sim) checkHeld() {
	live := *s.snapshot.Load()
	now := time.Now()
	for _, id := range s.ids {
		can := false
		for _, m := range live {
			if s.runnable(m, id) {
				can = true
				break
			}
		}
		if !can || s.holderOf(lease.Key(id, "ORDERS"), now) != "" {
			delete(s.freeAt, id)
			continue
		}
		at, ok := s.freeAt[id]
		if !ok {
			s.freeAt[id] = now
			continue
		}
		if now.Sub(at) > heldWithin {
			s.failures = append(s.failures, fmt.Sprintf("%6.1fs shop %s runnable but without a holder for %v", time.Since(s.t0).Seconds(), id, now.Sub(at).Round(time.Second)))
			delete(s.freeAt, id)
		}
	}
}

// settle ends the moves: pauses resumed, every registry file current,
// a member with every password; then every shop is held by exactly one
// member and every change is on the stream once.
func (s *sim) settle() {
	for _, p := range s.pending {
		p()
	}
	s.pending = nil
	for id := range s.present {
		s.present[id] = true
	}
	data := s.registryJSON()
	for _, m := range s.live() {
		if m.paused.Load() {
			m.paused.Store(false)
			m.proxy.resume()
		}
		writeFile(s.t, m.registry, data)
	}
	s.note("settle: every member resumed and current; join a member with every password")
	s.join(false)
	s.waitActive("settled")
	s.w.waitEvents(s.changes, 60*time.Second)
}

// waitActive waits until every shop is active on exactly one member.
func (s *sim) waitActive(what string) {
	for end := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ok, why := s.activeOnce()
		if ok {
			break
		}
		if time.Now().After(end) {
			s.t.Fatalf("%s, after 90 s: %s", what, why)
		}
	}
	s.note("%s: every shop active on one member", what)
}

// activeOnce: every shop is active (a verified sweep) on exactly one live
// member.
func (s *sim) activeOnce() (bool, string) {
	seen := map[string]string{}
	for _, m := range s.live() {
		for _, sr := range m.f.Report().Shops {
			if sr.State != StateActive || sr.Reason != "ok" {
				continue
			}
			if other, ok := seen[sr.ID]; ok {
				return false, sr.ID + " active on " + other + " and " + m.name
			}
			seen[sr.ID] = m.name
		}
	}
	if len(seen) == len(s.ids) {
		return true, ""
	}
	var why []string
	for _, id := range s.ids {
		if seen[id] != "" {
			continue
		}
		for _, m := range s.live() {
			for _, sr := range m.f.Report().Shops {
				if sr.ID == id {
					why = append(why, fmt.Sprintf("%s on %s: %s (holder %q) %s", id, m.name, sr.State, sr.Holder, sr.Reason))
				}
			}
		}
	}
	return false, fmt.Sprintf("%d of %d shops active: %s", len(seen), len(s.ids), strings.Join(why, "; "))
}

// check: no overlapping calls, no call by a member not holding the
// shop's lease, the liveness failures.
func (s *sim) check() {
	for _, f := range s.failures {
		s.t.Error(f)
	}
	// The service's default of 3 sessions: no shop was refused a login.
	for _, id := range s.ids {
		if st := s.w.sim.Tenant(id).Stats(); st.SessionLimit429 > 0 {
			s.t.Errorf("shop %s: %d logins refused with too_many_concurrent_sessions (%d logins, at most %d sessions at once)",
				id, st.SessionLimit429, st.LoginCalls, st.MaxConcurrentSessions)
		}
	}
	for id, cs := range s.w.callsSince(time.Time{}) {
		_, overlaps := splitTenures(id, cs)
		for _, o := range overlaps {
			s.t.Error(o)
		}
		key := lease.Key(id, "ORDERS")
		for _, c := range cs {
			m := agentMember(c.Agent)
			// Half a second of margin either way: the lease's times are
			// the NATS server's stamps, the call's the simulator's when its
			// handler ran (a call sent just inside a tenure can be handled
			// a moment after the key lapsed).
			margin := 500 * time.Millisecond
			h0, h1, hp := s.holderOf(key, c.Start), s.holderOf(key, c.Start.Add(margin)), s.holderOf(key, c.Start.Add(-margin))
			if h0 != m && h1 != m && hp != m && h0 != unknownHolder && h1 != unknownHolder {
				s.t.Errorf("shop %s called by %s at %s while %q held its lease", id, m, c.Start.Format(time.StampMicro), h0)
			}
		}
	}
}

// proxy is a TCP proxy from a member to NATS that can be paused: no byte
// passes either way while paused (a stopped process, a partition), and
// what was sent meanwhile passes on resume.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	closed bool
	conns  []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go p.pipe(c, u)
		go p.pipe(u, c)
	}
}

func (p *proxy) pipe(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused && !p.closed {
				p.cond.Wait()
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				break
			}
			if _, werr := to.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	from.Close()
	to.Close()
}

func (p *proxy) pause() { p.mu.Lock(); p.paused = true; p.mu.Unlock() }

func (p *proxy) resume() { p.mu.Lock(); p.paused = false; p.cond.Broadcast(); p.mu.Unlock() }

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	conns := p.conns
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
}
