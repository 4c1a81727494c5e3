package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/replica"
)

// The hot-standby scenario: two `watcher run` processes (separate state
// files, one simulator, one NATS) form a group while orders change; the
// active one is killed, stopped, paused past its lease and NATS restarts.
// The harness's faster sweep (interval, settle, overlap of newFaultEnv)
// is kept; the lease runs at its defaults (WATCHER_LEASE_TTL 9s).

// replicaProc is one replica's process: a faultEnv of its own for the
// harness's process handling (start, kill, logs), sharing the world.
type replicaProc struct {
	*faultEnv
	name string
	// cuts are when the test stopped or killed the process (under mu):
	// it makes no call from then on in the tenure it was in (see claims).
	cuts []time.Time
}

func (p *replicaProc) signal(sig syscall.Signal) {
	p.mu.Lock()
	c := p.proc
	if sig == syscall.SIGSTOP || sig == syscall.SIGKILL {
		p.cuts = append(p.cuts, time.Now())
	}
	p.mu.Unlock()
	_ = c.Process.Signal(sig)
}

// wait waits for the process to exit (after a kill or a SIGTERM).
func (p *replicaProc) wait() {
	p.mu.Lock()
	c := p.proc
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
}

func (p *replicaProc) metrics() string { _, m := get("http://" + p.addr + "/metrics"); return m }

func (p *replicaProc) leader() bool { return metricValue(p.metrics(), "orderwatch_leader") == 1 }

// access is one request that reached the simulator.
type access struct {
	at       time.Time
	instance string
	path     string
}

// tenure is a stretch of time during which the lease key named one holder
// ("" = nobody), from the server's stamp of the revision; unknown: the
// watch missed revisions of the bucket from then on (see watchLease), the
// holder is not known until the next revision of the key it saw.
type tenure struct {
	from    time.Time
	holder  string
	unknown bool
}

type standbyEnv struct {
	*faultEnv
	reps []*replicaProc

	mu       sync.Mutex
	accesses []access
	tenures  []tenure
}

func newStandbyEnv(t *testing.T) *standbyEnv {
	e := &standbyEnv{faultEnv: newFaultEnv(t, plentysim.Config{})}
	// The simulator behind a recorder: who called what, when.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, inst, _ := strings.Cut(r.UserAgent(), "(")
		inst, _, _ = strings.Cut(inst, ")")
		e.mu.Lock()
		e.accesses = append(e.accesses, access{time.Now(), inst, r.URL.Path})
		e.mu.Unlock()
		e.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	for _, name := range []string{"r1", "r2"} {
		p := &replicaProc{faultEnv: &faultEnv{t: t, addr: freePort(t), state: filepath.Join(t.TempDir(), name+".db")}, name: name}
		p.env = append(append([]string{}, e.env...), "WATCHER_PLENTY_URL="+srv.URL, "WATCHER_INSTANCE_ID="+name,
			"WATCHER_STATE_PATH="+p.state, "WATCHER_HTTP_ADDR="+p.addr)
		e.reps = append(e.reps, p)
	}
	go e.watchLease(srv.URL)
	return e
}

// watchLease records every revision of the lease key (and its expiry and
// delete markers) with the server's time stamp. It watches the whole
// bucket: its revisions are the stream's sequence, so a jump in them means
// the watch missed revisions (the bucket keeps one per key; a watch that
// lags, as after a NATS restart, finds the ones overwritten meanwhile
// gone). The holder is then unknown from the last revision seen until the
// key's next one (judge: the replicas' own tenures there).
func (e *standbyEnv) watchLease(shop string) {
	key := lease.Key(shop, "ORDERS")
	nc, err := nats.Connect(e.ns.ClientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return
	}
	e.t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	var last uint64
	var lastStamp time.Time
	for !nc.IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		kv, err := js.KeyValue(ctx, "orderwatch_lease")
		cancel()
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		w, err := kv.WatchAll(context.Background(), jetstream.IncludeHistory())
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for en := range w.Updates() {
			if en == nil || en.Revision() <= last {
				continue
			}
			e.mu.Lock()
			if en.Revision() != last+1 {
				e.tenures = append(e.tenures, tenure{from: lastStamp, unknown: true})
			}
			last, lastStamp = en.Revision(), en.Created()
			if en.Key() == key {
				var v lease.Value
				if en.Operation() == jetstream.KeyValuePut {
					_ = json.Unmarshal(en.Value(), &v)
				}
				e.tenures = append(e.tenures, tenure{from: en.Created(), holder: v.Instance})
			}
			e.mu.Unlock()
		}
		_ = w.Stop()
	}
}

// holderAt is the lease holder at t by the recorded history; known false
// when the watch missed revisions before t and saw none of the key since.
func holderAt(tenures []tenure, t time.Time) (holder string, known bool) {
	known = true
	for _, tn := range tenures {
		if tn.from.After(t) {
			break
		}
		holder, known = tn.holder, !tn.unknown
	}
	return holder, known
}

// span is a stretch of time during which a replica said it was active
// (its log: from "this replica is active" to "lost the lease", "released
// the lease" or the next start of its process), cut short when the test
// stopped or killed it: a process paused past its deadline says "lost"
// only once it runs again, but its fence (Gate) stopped it at the deadline,
// and it must make no call after SIGCONT.
type span struct{ from, to time.Time }

// claims reads a replica's log: the spans it said it was active, each cut
// at the first of cuts inside it.
func claims(log string, cuts []time.Time) []span {
	var out []span
	var open time.Time
	end := func(at time.Time) {
		if open.IsZero() {
			return
		}
		for _, c := range cuts {
			if !c.Before(open) && c.Before(at) {
				at = c
			}
		}
		out = append(out, span{open, at})
		open = time.Time{}
	}
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			continue
		}
		switch {
		case strings.HasSuffix(l.Msg, ": this replica is active"):
			if open.IsZero() {
				open = l.Time
			}
		case l.Msg == "orderwatch started", strings.HasPrefix(l.Msg, "lost the lease"), l.Msg == "released the lease":
			end(l.Time)
		}
	}
	end(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	return out
}

func claimed(spans []span, t time.Time) bool {
	for _, s := range spans {
		if !t.Before(s.from) && t.Before(s.to) {
			return true
		}
	}
	return false
}

// judgeCalls says which calls came from a replica that did not hold the
// lease: by the key's history where the watch saw every revision; where
// it missed some, the caller must have said it was active and no other
// replica that it was. byServer counts the calls judged by the history.
func judgeCalls(tenures []tenure, said map[string][]span, accesses []access) (bad []string, byServer int) {
	for _, a := range accesses {
		h, known := holderAt(tenures, a.at)
		if known {
			byServer++
			if h != a.instance {
				bad = append(bad, fmt.Sprintf("%s %s at %s while the lease was held by %q", a.instance, a.path, a.at.Format("15:04:05.000"), h))
			}
			continue
		}
		var others []string
		for name, spans := range said {
			if name != a.instance && claimed(spans, a.at) {
				others = append(others, name)
			}
		}
		slices.Sort(others)
		if !claimed(said[a.instance], a.at) || len(others) > 0 {
			bad = append(bad, fmt.Sprintf("%s %s at %s (revisions of the key missed by the watch): active by its own log %v, others active by theirs %v",
				a.instance, a.path, a.at.Format("15:04:05.000"), claimed(said[a.instance], a.at), others))
		}
	}
	return bad, byServer
}

func (e *standbyEnv) active() *replicaProc {
	for _, p := range e.reps {
		if p.leader() {
			return p
		}
	}
	return nil
}

func (e *standbyEnv) other(p *replicaProc) *replicaProc {
	if p == e.reps[0] {
		return e.reps[1]
	}
	return e.reps[0]
}

// firstCallBy is the time of the first request of instance after t.
func (e *standbyEnv) firstCallBy(instance string, after time.Time) time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range e.accesses {
		if a.instance == instance && a.at.After(after) {
			return a.at
		}
	}
	return time.Time{}
}

func (e *standbyEnv) waitActive(what string, limit time.Duration) *replicaProc {
	e.t.Helper()
	var act *replicaProc
	waitFor(e.t, what, limit, func() bool { act = e.active(); return act != nil })
	return act
}

// quiesceGroup stops the changes and waits until the active replica swept
// past the last one, published everything and the standby caught up.
func (e *standbyEnv) quiesceGroup() {
	e.t.Helper()
	if e.mutStop != nil {
		e.mutStop()
		<-e.mutDone
		e.mutStop = nil
	}
	var last time.Time
	for _, ch := range e.sim.History() {
		if ch.At.After(last) {
			last = ch.At
		}
	}
	waitFor(e.t, "the active replica to sweep past the last change and empty its outbox, the standby to be ready", 90*time.Second, func() bool {
		act := e.active()
		if act == nil {
			return false
		}
		m := act.metrics()
		wm := time.Unix(int64(metricValue(m, "orderwatch_watermark_timestamp_seconds")), 0)
		code, _ := get("http://" + act.addr + "/readyz")
		scode, _ := get("http://" + e.other(act).addr + "/readyz")
		return code == 200 && scode == 200 && wm.After(last) && strings.Contains(m, "orderwatch_outbox_depth 0")
	})
}

// checkChains reads the stream and checks that every event continues its
// order's history: a status or lock change starts where the last event
// (or the initial state) of the order ended; no order is "discovered"
// (every order here was either in the first sync or created later).
func (e *standbyEnv) checkChains() (byType map[string]int) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, total := e.stream(ctx)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		e.t.Fatal(err)
	}
	type st struct{ status, lock string }
	type step struct{ before, after st }
	last := map[int64]step{} // one change gives one event per change type, all with its before and after
	cur := map[int64]st{}
	for id, o := range e.initial {
		cur[id] = st{order.MustDecimal(o.StatusID).Canonical(), o.LockStatus}
	}
	byType = map[string]int{}
	for i := 0; i < total; i++ {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			e.t.Fatalf("reading event %d of %d: %v", i, total, err)
		}
		ev, err := diff.DecodeEvent(msg.Data())
		if err != nil {
			e.t.Fatal(err)
		}
		byType[string(ev.Type)]++
		id := ev.OrderID
		after := st{ev.After.StatusID.Canonical(), ev.After.LockStatus}
		prev, known := cur[id]
		switch {
		case ev.Type == diff.Discovered:
			e.t.Errorf("order %d discovered: a spurious first sight (the standby's snapshot lacked it)", id)
		case ev.Before == nil && known:
			e.t.Errorf("order %d: %s without a before, but the order was known", id, ev.Type)
		case ev.Before != nil:
			before := st{ev.Before.StatusID.Canonical(), ev.Before.LockStatus}
			if same := last[id]; (!known || before != prev) && (same.before != before || same.after != after) {
				e.t.Errorf("order %d: %s from %+v, but its last state in the stream was %+v (known %v): a spurious or missed transition", id, ev.Type, before, prev, known)
			}
			last[id] = step{before, after}
		}
		cur[id] = after
	}
	return byType
}

// checkCalls: every request to the shop came from the instance that held
// the lease at that moment (no call by a standby, none by a demoted
// process after its deadline), see judgeCalls.
func (e *standbyEnv) checkCalls() (calls map[string]int) {
	e.t.Helper()
	said := map[string][]span{}
	for _, p := range e.reps {
		p.mu.Lock()
		said[p.name] = claims(p.logs.String(), p.cuts)
		p.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	calls = map[string]int{}
	for _, a := range e.accesses {
		calls[a.instance]++
	}
	bad, byServer := judgeCalls(e.tenures, said, e.accesses)
	for i, b := range bad {
		if i < 5 {
			e.t.Error(b)
		}
	}
	if len(bad) > 0 {
		e.t.Errorf("%d calls by a replica that did not hold the lease", len(bad))
	}
	if byServer == 0 {
		e.t.Errorf("none of the %d calls judged by the lease key's history: the watch saw nothing", len(e.accesses))
	}
	var gaps []string
	for i, tn := range e.tenures {
		if tn.unknown {
			to := "the end"
			if i+1 < len(e.tenures) {
				to = e.tenures[i+1].from.Format("15:04:05.000")
			}
			gaps = append(gaps, tn.from.Format("15:04:05.000")+"-"+to)
		}
	}
	var seen []tenure // the history without the jumps noticed: the judge before
	for _, tn := range e.tenures {
		if !tn.unknown {
			seen = append(seen, tn)
		}
	}
	blind, _ := judgeCalls(seen, nil, e.accesses)
	e.t.Logf("calls judged by the lease key's history: %d of %d; the rest by the replicas' logs, where the watch missed revisions: %v (a judge blind to them would flag %d)", byServer, len(e.accesses), gaps, len(blind))
	return calls
}

func (e *standbyEnv) dumpLogs() {
	for _, p := range e.reps { // a binary built with GOFLAGS=-race reports here
		p.mu.Lock()
		if i := strings.Index(p.logs.String(), "WARNING: DATA RACE"); i >= 0 {
			e.t.Errorf("%s: %s", p.name, tail(p.logs.String()[i:], 3000))
		}
		p.mu.Unlock()
	}
	if !e.t.Failed() {
		return
	}
	for _, p := range e.reps {
		p.mu.Lock()
		var lines []string
		for _, l := range strings.Split(p.logs.String(), "\n") {
			if !strings.Contains(l, `"msg":"sweep"`) {
				lines = append(lines, l)
			}
		}
		e.t.Logf("%s log without the sweep lines (tail):\n%s", p.name, tail(strings.Join(lines, "\n"), 12000))
		p.mu.Unlock()
	}
}

func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

func TestFaultStandby(t *testing.T) {
	t.Parallel() // its own simulator, NATS server, state files and ports; mostly waiting
	kills := 2
	if *faultLong {
		kills = 10
	}
	e := newStandbyEnv(t)
	defer e.dumpLogs()
	e.reps[0].start()
	waitReady(t, e.reps[0].addr) // the first sync done by r1
	e.reps[1].start()
	waitReady(t, e.reps[1].addr) // r2: a standby caught up with the stream
	e.mutate(20)

	var killTakeovers, termTakeovers []time.Duration
	takeover := func(what string, from *replicaProc, at time.Time, limit time.Duration) time.Duration {
		t.Helper()
		to := e.other(from)
		var first time.Time
		waitFor(t, to.name+" to call the shop after "+what, limit, func() bool { first = e.firstCallBy(to.name, at); return !first.IsZero() })
		d := first.Sub(at)
		t.Logf("%s of %s: %s called the shop after %v", what, from.name, to.name, d.Round(10*time.Millisecond))
		return d
	}

	// kill -9 of the active, restarted at once as the new standby.
	for range kills {
		time.Sleep(2 * time.Second)
		act := e.waitActive("an active replica", 30*time.Second)
		at := time.Now()
		act.signal(syscall.SIGKILL)
		act.wait()
		// Restarted at once it would take its own lease back (same state
		// file): the standby's takeover is measured first.
		killTakeovers = append(killTakeovers, takeover("kill -9", act, at, 30*time.Second))
		act.start()
		waitReady(t, act.addr)
	}
	// SIGTERM: the lease is released, the standby takes over at once.
	for range max(kills/2, 1) {
		time.Sleep(2 * time.Second)
		act := e.waitActive("an active replica", 30*time.Second)
		at := time.Now()
		act.signal(syscall.SIGTERM)
		termTakeovers = append(termTakeovers, takeover("SIGTERM", act, at, 15*time.Second))
		act.wait()
		act.start()
		waitReady(t, act.addr)
	}
	// SIGSTOP past the lease, then SIGCONT: the paused one wakes demoted
	// and makes no call.
	{
		time.Sleep(2 * time.Second)
		act := e.waitActive("an active replica", 30*time.Second)
		at := time.Now()
		act.signal(syscall.SIGSTOP)
		takeover("SIGSTOP", act, at, 30*time.Second)
		time.Sleep(3 * time.Second)
		act.signal(syscall.SIGCONT)
		waitReady(t, act.addr)
		if act.leader() {
			t.Errorf("%s is the leader again right after SIGCONT", act.name)
		}
	}
	// NATS restart (longer than the lease deadline): the active cannot
	// renew, steps down; after the restart one of them takes over.
	{
		time.Sleep(2 * time.Second)
		e.ns.Shutdown()
		e.ns.WaitForShutdown()
		time.Sleep(10 * time.Second)
		e.startNATS()
		e.waitActive("an active replica after the NATS restart", 60*time.Second)
	}
	// Both restarted at once.
	{
		time.Sleep(2 * time.Second)
		for _, p := range e.reps {
			p.signal(syscall.SIGKILL)
		}
		for _, p := range e.reps {
			p.wait()
			p.start()
		}
		e.waitActive("an active replica after both restarted", 60*time.Second)
	}
	time.Sleep(2 * time.Second)
	e.quiesceGroup()
	// The holder in the state report and in `watcher check`.
	act := e.active()
	for _, p := range e.reps {
		_, body := get("http://" + p.addr + "/state")
		var rep struct {
			Lease replica.Report `json:"lease"`
		}
		if err := json.Unmarshal([]byte(body), &rep); err != nil || rep.Lease.Holder != act.name || (rep.Lease.Role == "active") != (p == act) {
			t.Errorf("%s: state report lease %+v (%v); want holder %s", p.name, rep.Lease, err, act.name)
		}
	}
	cmd := exec.Command(watcherBin(t), "check")
	cmd.Env = e.other(act).env
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "held by "+act.name) {
		t.Errorf("watcher check does not name the holder %s:\n%s", act.name, out)
	}
	n := e.check()
	byType := e.checkChains()
	calls := e.checkCalls()
	st := e.sim.Stats()
	if st.SessionLimit429 != 0 || st.MaxConcurrentSessions > 2 {
		t.Errorf("%d session-limit 429s, at most %d sessions at once; want 0 and at most one per replica", st.SessionLimit429, st.MaxConcurrentSessions)
	}
	for _, d := range killTakeovers {
		if d > 15*time.Second {
			t.Errorf("a takeover after kill -9 took %v; want at most 15s", d)
		}
	}
	for _, d := range termTakeovers {
		if d > 2*time.Second {
			t.Errorf("a takeover after SIGTERM took %v; want at most 2s", d)
		}
	}
	t.Logf("kill -9: %d takeovers, p50 %v, max %v; SIGTERM: %d, p50 %v, max %v",
		len(killTakeovers), percentile(killTakeovers, 0.5).Round(10*time.Millisecond), slices.Max(killTakeovers).Round(10*time.Millisecond),
		len(termTakeovers), percentile(termTakeovers, 0.5).Round(10*time.Millisecond), slices.Max(termTakeovers).Round(10*time.Millisecond))
	t.Logf("%d events checked (0 lost, 0 doubled, 0 spurious: %v), %d changes made; calls to the shop by instance %v, all by the lease holder; %d logins, max %d sessions at once, %d session-limit 429s",
		n, byType, len(e.sim.History()), calls, st.LoginCalls, st.MaxConcurrentSessions, st.SessionLimit429)
}

// watcher rescan: an order the service committed late, outside the
// overlap (an incident), is missed by the sweeps; a rescan of the period
// finds it and publishes it, and nothing else.
func TestStandbyRescan(t *testing.T) {
	e := newStandbyEnv(t)
	defer e.dumpLogs()
	r := e.reps[0]
	r.start()
	waitFor(t, "the first sync to end", 30*time.Second, func() bool {
		return metricValue(r.metrics(), "orderwatch_first_sync_progress_ratio") == 1
	})
	ctx := context.Background()
	stream, before := e.stream(ctx)
	at := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	late := e.sim.AddOrder(plentysim.Order{CreatedAt: at, UpdatedAt: at, StatusID: "5"})
	time.Sleep(2 * time.Second) // several sweeps: the late order is outside their overlap
	if _, n := e.stream(ctx); n != before {
		t.Fatalf("%d events after the late commit, want %d: the sweeps should miss it", n, before)
	}
	orderURL := fmt.Sprintf("http://%s/state/orders/%d", r.addr, late.ID)
	if code, _ := get(orderURL); code != 404 {
		t.Fatalf("the late order is tracked already (%d): the test needs it missed", code)
	}
	wm0 := metricValue(r.metrics(), "orderwatch_watermark_timestamp_seconds")
	cmd := exec.Command(watcherBin(t), "rescan", "--from", "3h")
	cmd.Env = r.env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "reads from") {
		t.Fatalf("watcher rescan: %v\n%s", err, out)
	}
	waitFor(t, "the rescan to publish the late order", 30*time.Second, func() bool { _, n := e.stream(ctx); return n == before+1 })
	// The rescan's sweeps reach the watermark of before the rescan again
	// (it trails the newest stamp served: poller/clock.go); nothing else
	// is published.
	waitFor(t, "the watermark back where it was", 30*time.Second, func() bool {
		m := r.metrics()
		return metricValue(m, "orderwatch_rescan_requests_total") == 1 && metricValue(m, "orderwatch_watermark_timestamp_seconds") >= wm0
	})
	if _, n := e.stream(ctx); n != before+1 {
		t.Errorf("%d events after the rescan, want %d (the late order only)", n, before+1)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, "orders.>")
	if err != nil {
		t.Fatal(err)
	}
	d, err := diff.DecodeEvent(msg.Data)
	if err != nil || d.OrderID != late.ID {
		t.Errorf("the rescan's event: %+v (%v), want order %d", d, err, late.ID)
	}
	t.Logf("rescan --from 3h: order %d (committed 2h late) published as %s; %d events before, %d after", late.ID, d.Type, before, before+1)
}
