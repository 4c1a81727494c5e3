package faults

import (
	"context"
	"encoding/json"
	"flag"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/schemas"
)

// The fault suite runs the real binary against the simulator and an
// in-process NATS server while orders change, injects one kind of fault,
// and after quiescence checks the invariants of the delivery guarantee.
// The default run is short; -fault-long runs every scenario longer.
var faultLong = flag.Bool("fault-long", false, "run the fault scenarios at full length")

// faultsAll runs every fault scenario (make faults sets it, and
// -fault-long implies it). Without it `go test` runs the quick ones only
// (quickFaults): the suite has grown past what the default test run can
// spend (about 25 minutes for all short variants on two cores).
var faultsAll = flag.Bool("faults", false, "run every fault scenario (short variants unless -fault-long)")

// quickFaults are the scenarios the default `go test` runs: the core of
// the delivery guarantee under kill -9, an outage, a second instance and
// SIGTERM, the failover of two replicas, a lost acknowledgement past the
// duplicate window, a restart inside a Date skew, a spent daily quota and
// unreadable records: a few seconds to a minute each.
var quickFaults = map[string]bool{
	"TestFaultKill9":                         true,
	"TestFaultNATSOutage":                    true,
	"TestFaultSecondInstance":                true,
	"TestFaultSIGTERMUnderLoad":              true,
	"TestFaultStandby":                       true,
	"TestFaultLostAckOutageLongerThanWindow": true,
	"TestFaultClockRestartInsideSkewAhead":   true,
	"TestFaultDailyQuotaSpent":               true,
	"TestFaultCorruptRecords":                true,
}

// skipSlowFault skips a fault scenario that is not quick unless -faults
// or -fault-long asks for every one (newFaultEnv calls it).
func skipSlowFault(t *testing.T) {
	t.Helper()
	name, _, _ := strings.Cut(t.Name(), "/")
	if strings.HasPrefix(name, "TestFault") && !quickFaults[name] && !*faultsAll && !*faultLong {
		t.Skip("a fault scenario of `make faults` (go test -run TestFault ./faults -args -faults)")
	}
}

// faultEnv is one scenario's world.
type faultEnv struct {
	t       *testing.T
	sim     *plentysim.Server
	srv     *httptest.Server
	natsOpt server.Options
	ns      *server.Server
	state   string
	addr    string
	env     []string
	initial map[int64]plentysim.Order
	mutStop context.CancelFunc
	mutDone chan struct{}

	mu   sync.Mutex
	proc *exec.Cmd
	logs strings.Builder
}

func newFaultEnv(t *testing.T, simCfg plentysim.Config, env ...string) *faultEnv {
	t.Helper()
	skipSlowFault(t)
	if simCfg.Seed == 0 {
		simCfg.Seed = 77
	}
	if simCfg.Limits.LongLimit == 0 {
		// A test minute would otherwise stretch the interval to the daily
		// quota's pace; the short and route limits are what storms test.
		simCfg.Limits.LongLimit = 1 << 30
	}
	f := &faultEnv{t: t, sim: plentysim.New(simCfg), state: filepath.Join(t.TempDir(), "state.db"), addr: freePort(t)}
	f.sim.Generate(300, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Minute))
	for _, o := range f.sim.Orders() {
		if f.initial == nil {
			f.initial = map[int64]plentysim.Order{}
		}
		f.initial[o.ID] = o
	}
	f.srv = httptest.NewServer(f.sim)
	t.Cleanup(f.srv.Close)
	f.natsOpt = server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true}
	f.startNATS()
	t.Cleanup(func() { f.ns.Shutdown() })
	f.env = append(cleanEnv(),
		"WATCHER_PLENTY_URL="+f.srv.URL, "WATCHER_PLENTY_USERNAME=demo", "WATCHER_PLENTY_PASSWORD=demo",
		"WATCHER_NATS_URL=nats://"+f.ns.Addr().String(), "WATCHER_STATE_PATH="+f.state,
		"WATCHER_POLL_INTERVAL=300ms", "WATCHER_SETTLE=1s", "WATCHER_OVERLAP=3s", "WATCHER_CALL_SHARE=1",
		"WATCHER_HTTP_ADDR="+f.addr, "WATCHER_SHUTDOWN_TIMEOUT=5s", "WATCHER_PLENTY_TIMEOUT=2s",
	)
	f.env = append(f.env, env...)
	return f
}

func (f *faultEnv) startNATS() {
	ns, err := server.NewServer(&f.natsOpt)
	if err != nil {
		f.t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		f.t.Fatal("NATS did not start")
	}
	f.ns = ns
	f.natsOpt.Port = ns.Addr().(*net.TCPAddr).Port // a restart comes back on the same port
}

// start runs the watcher binary.
func (f *faultEnv) start() {
	f.t.Helper()
	cmd := exec.Command(watcherBin(f.t), "run")
	cmd.Env = f.env
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := stderr.Read(b)
			f.mu.Lock()
			f.logs.Write(b[:n])
			f.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	f.mu.Lock()
	f.proc = cmd
	f.mu.Unlock()
	f.t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
}

// kill sends SIGKILL and waits for the process to go.
func (f *faultEnv) kill() {
	f.mu.Lock()
	p := f.proc
	f.mu.Unlock()
	_ = p.Process.Kill()
	_ = p.Wait()
}

// stop sends SIGTERM and returns the exit error and how long it took.
func (f *faultEnv) stop() (error, time.Duration) {
	f.mu.Lock()
	p := f.proc
	f.mu.Unlock()
	start := time.Now()
	_ = p.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.Wait() }()
	select {
	case err := <-done:
		return err, time.Since(start)
	case <-time.After(15 * time.Second):
		_ = p.Process.Kill()
		return context.DeadlineExceeded, time.Since(start)
	}
}

func (f *faultEnv) mutate(rate float64) {
	ctx, cancel := context.WithCancel(context.Background())
	f.mutStop, f.mutDone = cancel, make(chan struct{})
	go func() {
		defer close(f.mutDone)
		f.sim.RunMutator(ctx, plentysim.MutatorConfig{Rate: rate})
	}()
}

// quiesce stops the mutator and waits until the watcher has swept past the
// last change and published everything.
func (f *faultEnv) quiesce() {
	f.t.Helper()
	if f.mutStop != nil {
		f.mutStop()
		<-f.mutDone
	}
	f.sim.SetFaults(plentysim.Faults{})
	var last time.Time // the updatedAt of the last change
	for _, ch := range f.sim.History() {
		if ch.At.After(last) {
			last = ch.At
		}
	}
	base := "http://" + f.addr
	waitFor(f.t, "the watcher to sweep past the last change and empty its outbox", 60*time.Second, func() bool {
		code, _ := get(base + "/readyz")
		_, m := get(base + "/metrics")
		wm := time.Unix(int64(metricValue(m, "orderwatch_watermark_timestamp_seconds")), 0)
		return code == 200 && wm.After(last) && strings.Contains(m, "orderwatch_outbox_depth 0")
	})
}

// check folds the stream over the initial states and verifies the
// invariants: every order ends in its true state, no event id twice, no
// event shows a status the order never had, every event validates.
func (f *faultEnv) check() (events int) {
	f.t.Helper()
	return f.checkExcept(nil)
}

// checkExcept is check, except that the orders in except need not end in
// their true state (an order held back on purpose, e.g. quarantined).
func (f *faultEnv) checkExcept(except map[int64]bool) (events int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, total := f.stream(ctx)
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		f.t.Fatal(err)
	}
	had := map[int64]map[string]bool{}
	for id, o := range f.initial {
		had[id] = map[string]bool{order.MustDecimal(o.StatusID).Canonical(): true}
	}
	for _, ch := range f.sim.History() {
		if had[ch.OrderID] == nil {
			had[ch.OrderID] = map[string]bool{}
		}
		if ch.Kind == "status" {
			had[ch.OrderID][order.MustDecimal(ch.From).Canonical()] = true
			had[ch.OrderID][order.MustDecimal(ch.To).Canonical()] = true
		}
	}
	for _, o := range f.sim.Orders() { // the status of an order created and never changed
		if had[o.ID] == nil {
			had[o.ID] = map[string]bool{}
		}
		had[o.ID][order.MustDecimal(o.StatusID).Canonical()] = true
	}
	type st struct{ status, lock string }
	fold := map[int64]st{}
	for id, o := range f.initial {
		fold[id] = st{order.MustDecimal(o.StatusID).Canonical(), o.LockStatus}
	}
	seen := map[string]bool{}
	for i := 0; i < total; i++ {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			f.t.Fatalf("reading event %d of %d: %v", i, total, err)
		}
		if err := schemas.Validate(msg.Data()); err != nil {
			f.t.Errorf("event does not validate: %v", err)
		}
		var ev struct {
			ID   string `json:"id"`
			Type string `json:"type"`
			Data struct {
				OrderID int64 `json:"orderId"`
				After   struct {
					StatusID   json.Number `json:"statusId"`
					LockStatus string      `json:"lockStatus"`
				} `json:"after"`
			} `json:"data"`
		}
		if err := json.Unmarshal(msg.Data(), &ev); err != nil {
			f.t.Fatal(err)
		}
		if seen[ev.ID] {
			f.t.Errorf("event %s (%s of order %d) twice in the stream", ev.ID, ev.Type, ev.Data.OrderID)
		}
		seen[ev.ID] = true
		status := order.MustDecimal(ev.Data.After.StatusID.String()).Canonical()
		if h := had[ev.Data.OrderID]; h == nil || !h[status] {
			f.t.Errorf("order %d: event shows status %s, which it never had", ev.Data.OrderID, status)
		}
		fold[ev.Data.OrderID] = st{status, ev.Data.After.LockStatus}
	}
	for _, o := range f.sim.Orders() {
		want := st{order.MustDecimal(o.StatusID).Canonical(), o.LockStatus}
		if got, ok := fold[o.ID]; (!ok || got != want) && !except[o.ID] {
			f.t.Errorf("order %d: the stream folds to %+v, the order is %+v", o.ID, got, want)
		}
	}
	if f.t.Failed() {
		f.mu.Lock()
		f.t.Logf("watcher log (tail):\n%s", tail(f.logs.String(), 4000))
		f.mu.Unlock()
	}
	return total
}

// stream opens the ORDERS stream (on a connection closed at the end of
// the test) and says how many messages it holds.
func (f *faultEnv) stream(ctx context.Context) (jetstream.Stream, int) {
	f.t.Helper()
	nc, err := nats.Connect(f.ns.ClientURL())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	stream, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		f.t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return stream, int(info.State.Msgs)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func waitReady(t *testing.T, addr string) {
	t.Helper()
	waitFor(t, "/readyz", 30*time.Second, func() bool { code, _ := get("http://" + addr + "/readyz"); return code == 200 })
}

func TestFaultKill9(t *testing.T) {
	cycles := 3
	if *faultLong {
		cycles = 50
	}
	f := newFaultEnv(t, plentysim.Config{})
	f.start()
	waitReady(t, f.addr)
	f.mutate(20)
	for range cycles {
		time.Sleep(time.Duration(200+time.Now().UnixNano()%600) * time.Millisecond)
		f.kill()
		f.start()
	}
	f.quiesce()
	n := f.check()
	// Every restart reuses the persisted token: one login in all (two if a
	// kill fell between a login and the write of its token).
	st := f.sim.Stats()
	if st.LoginCalls > 2 || st.MaxConcurrentSessions > 2 {
		t.Errorf("%d logins, at most %d sessions at once over %d restarts: restarts should reuse the stored token", st.LoginCalls, st.MaxConcurrentSessions, cycles)
	}
	t.Logf("%d kill -9 cycles, %d logins, %d events checked", cycles, st.LoginCalls, n)
}

func scale(short, long time.Duration) time.Duration {
	if *faultLong {
		return long
	}
	return short
}

func TestFaultNATSOutage(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{})
	f.start()
	waitReady(t, f.addr)
	f.mutate(20)
	time.Sleep(time.Second)
	f.ns.Shutdown()
	f.ns.WaitForShutdown()
	time.Sleep(scale(3*time.Second, 30*time.Second)) // changes keep coming; the outbox grows
	waitFor(t, "readiness to fail while NATS is down", 10*time.Second, func() bool { code, _ := get("http://" + f.addr + "/readyz"); return code != 200 })
	f.startNATS() // same port, same store dir
	f.quiesce()
	t.Logf("NATS outage of %s: %d events checked", scale(3*time.Second, 30*time.Second), f.check())
}

// 429 storms: first tight limits alone, where proactive pacing keeps 429s
// rare; then another integration of the same API user uses up the short
// period's quota at random moments, so the watcher runs into 429s it could
// not foresee and must make no call until their Retry-After has passed.
func TestFault429Storm(t *testing.T) {
	limits := plentysim.Limits{ShortLimit: 8, ShortPeriod: 3 * time.Second, RouteLimit: 6, RoutePeriod: 2 * time.Second}
	f := newFaultEnv(t, plentysim.Config{Limits: limits})
	f.start()
	waitReady(t, f.addr)
	f.mutate(20)
	time.Sleep(scale(5*time.Second, 60*time.Second))
	paced := f.sim.Stats()
	if paced.Throttled429*10 > paced.SearchCalls {
		t.Errorf("%d 429s in %d searches: proactive pacing should keep them rare", paced.Throttled429, paced.SearchCalls)
	}

	// A period long enough that the watcher calls again before it ends.
	limits = plentysim.Limits{ShortLimit: 20, ShortPeriod: 6 * time.Second, LongLimit: 1 << 30}
	f.sim.SetLimits(limits)
	storms := 0
	for end := time.Now().Add(scale(10*time.Second, 60*time.Second)); time.Now().Before(end); storms++ {
		time.Sleep(2*time.Second + time.Duration(rand.Int64N(int64(2*time.Second))))
		f.sim.ConsumeQuota("demo", limits.ShortLimit) // another integration of the same API user
	}
	f.quiesce()
	n := f.check()
	st := f.sim.Stats()
	if st.CallsWhileBlocked != 0 {
		t.Errorf("%d calls while a Retry-After was pending", st.CallsWhileBlocked)
	}
	stormed := st.Throttled429 - paced.Throttled429
	if stormed == 0 {
		t.Errorf("%d storms caused no 429: the watcher should have run into some", storms)
	}
	t.Logf("tight limits: %d searches, %d 429s; then %d storms: %d 429s, 0 calls while a Retry-After was pending; %d events checked",
		paced.SearchCalls, paced.Throttled429, storms, stormed, n)
}

func TestFaultGarbage(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{})
	f.start()
	waitReady(t, f.addr)
	f.sim.SetFaults(plentysim.Faults{HTMLRate: 0.05, TruncateRate: 0.05, GarbageRate: 0.05, ServerErrorRate: 0.05, DropRate: 0.04, SlowRate: 0.04, SlowDelay: 3 * time.Second})
	f.mutate(20)
	time.Sleep(scale(5*time.Second, 60*time.Second))
	f.quiesce()
	n := f.check()
	t.Logf("~25%% bad responses (HTML 502, truncated, invalid JSON, 500, dropped, slower than the timeout): %d faults injected, %d events checked", f.sim.Stats().FaultsInjected, n)
}

func TestFaultShortTokenLifetime(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{TokenTTL: 2 * time.Second, DisableRefresh: true})
	f.start()
	waitReady(t, f.addr)
	f.mutate(10)
	time.Sleep(scale(5*time.Second, 30*time.Second))
	f.kill() // a restart reuses the persisted token while it lives
	f.start()
	time.Sleep(2 * time.Second)
	f.quiesce()
	n := f.check()
	st := f.sim.Stats()
	if st.MaxConcurrentSessions > 1 || st.SessionLimit429 != 0 {
		t.Errorf("max concurrent sessions %d, session-limit 429s %d; want 1 and 0", st.MaxConcurrentSessions, st.SessionLimit429)
	}
	t.Logf("token lifetime 2s: %d logins, max %d session at once, %d events checked", st.LoginCalls, st.MaxConcurrentSessions, n)
}

func TestFaultSecondInstance(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{})
	f.start()
	waitReady(t, f.addr)
	cmd := exec.Command(watcherBin(t), "run")
	cmd.Env = append(append([]string{}, f.env...), "WATCHER_HTTP_ADDR="+freePort(t))
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "locked by another process") {
		t.Errorf("second instance: %v\n%s", err, out)
	}
	if code, _ := get("http://" + f.addr + "/readyz"); code != 200 {
		t.Error("the first instance is no longer ready")
	}
}

func TestFaultSIGTERMUnderLoad(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{}, "WATCHER_SHUTDOWN_TIMEOUT=3s")
	f.start()
	waitReady(t, f.addr)
	f.mutate(50)
	time.Sleep(2 * time.Second)
	err, took := f.stop()
	if err != nil || took > 5*time.Second {
		t.Errorf("SIGTERM under load: exit %v after %v; want 0 within the 3s timeout (+2s)", err, took)
	}
	f.start() // nothing lost on the next start
	waitReady(t, f.addr)
	f.quiesce()
	t.Logf("SIGTERM under load: exit 0 in %v, %d events checked after the restart", took.Round(time.Millisecond), f.check())
}

var soak = flag.Duration("soak", 0, "run TestSoak for this long (e.g. 30m)")

// faultNames name the soak's faults: the five of every platform, then
// platformFaults'.
var faultNames = []string{"kill -9", "NATS outage 10 s", "bad responses 20 s", "tight limits 20 s", "429 storm 20 s", "state disk full 20 s"}

// TestSoak runs the watcher for -soak at three times a busy shop's change
// rate (a busy shop: ~1 change/s) with a random fault every minute, samples
// heap, goroutines and state file size every minute, and checks the
// invariants at the end. Skipped unless -soak is set (make soak).
func TestSoak(t *testing.T) {
	if *soak == 0 {
		t.Skip("set -soak=30m to run")
	}
	f := newFaultEnv(t, plentysim.Config{})
	f.start()
	waitReady(t, f.addr)
	f.mutate(3)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	end := time.Now().Add(*soak)
	type sample struct {
		at                  time.Duration
		heapMiB, goroutines float64
		fileKiB             int64
	}
	var samples []sample
	start := time.Now()
	faults := append([]func(){
		func() { f.kill(); f.start() },
		func() {
			f.ns.Shutdown()
			f.ns.WaitForShutdown()
			time.Sleep(10 * time.Second)
			f.startNATS()
		},
		func() {
			f.sim.SetFaults(plentysim.Faults{HTMLRate: 0.1, TruncateRate: 0.1, GarbageRate: 0.1, DropRate: 0.05})
			time.Sleep(20 * time.Second)
			f.sim.SetFaults(plentysim.Faults{})
		},
		func() {
			f.sim.SetLimits(plentysim.Limits{ShortLimit: 8, ShortPeriod: 3 * time.Second, LongLimit: 1 << 30})
			time.Sleep(20 * time.Second)
			f.sim.SetLimits(plentysim.Limits{LongLimit: 1 << 30})
		},
		func() {
			for range 5 { // another integration of the same API user uses up the short period
				f.sim.ConsumeQuota("demo", plentysim.DefaultShortLimit)
				time.Sleep(4 * time.Second)
			}
		},
	}, platformFaults(f)...)
	for minute := 0; time.Now().Before(end); minute++ {
		fault := rng.IntN(len(faults))
		faults[fault]()
		time.Sleep(time.Until(start.Add(time.Duration(minute+1) * time.Minute)))
		_, m := get("http://" + f.addr + "/metrics")
		fi, _ := os.Stat(f.state)
		s := sample{at: time.Since(start).Round(time.Second), heapMiB: metricValue(m, "go_memstats_heap_inuse_bytes") / (1 << 20), goroutines: metricValue(m, "go_goroutines")}
		if fi != nil {
			s.fileKiB = fi.Size() >> 10
		}
		samples = append(samples, s)
		t.Logf("%v: heap %.1f MiB, goroutines %.0f, state file %d KiB (after: %s)", s.at, s.heapMiB, s.goroutines, s.fileKiB, faultNames[fault])
	}
	f.quiesce()
	n := f.check()
	st := f.sim.Stats()
	if st.CallsWhileBlocked != 0 {
		t.Errorf("%d calls while a Retry-After was pending", st.CallsWhileBlocked)
	}
	t.Logf("soak of %v: %d events checked, %d changes made, %d searches, %d 429s, 0 calls while a Retry-After was pending; first sample %+v, last %+v",
		*soak, n, len(f.sim.History()), st.SearchCalls, st.Throttled429, samples[0], samples[len(samples)-1])
}
