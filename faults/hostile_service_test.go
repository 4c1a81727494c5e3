package faults

import (
	"context"
	"encoding/binary"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	bolt "go.etcd.io/bbolt"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plentysim"
)

// Fault scenarios of a hostile service (found in the review of issue 18) and
// restarts (kill -9) inside the waits it asks for. They run at the
// service's real default limits (166,000 calls a day, 200 per short
// period, 3 sessions); the watcher's configuration is the harness's
// (newFaultEnv) unless a scenario says otherwise.

// hostileProxy stands between the watcher and the simulator: it records
// when each request arrived and, when armed, answers the next search
// itself with the 429 given.
type hostileProxy struct {
	mu    sync.Mutex
	calls []time.Time
	armed func(w http.ResponseWriter) // answers the next search; nil: pass on
	hit   chan time.Time
}

func (f *faultEnv) hostileProxy() *hostileProxy {
	p := &hostileProxy{hit: make(chan time.Time, 1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		p.mu.Lock()
		p.calls = append(p.calls, now)
		answer := p.armed
		if r.URL.Path == plentysim.PathSearch {
			p.armed = nil
		} else {
			answer = nil
		}
		p.mu.Unlock()
		if answer != nil {
			answer(w)
			p.hit <- now
			return
		}
		f.sim.ServeHTTP(w, r)
	}))
	f.t.Cleanup(srv.Close)
	f.env = append(f.env, "WATCHER_PLENTY_URL="+srv.URL) // the last one counts
	return p
}

func (p *hostileProxy) arm(answer func(w http.ResponseWriter)) {
	p.mu.Lock()
	p.armed = answer
	p.mu.Unlock()
}

// answer429 answers the next search with a 429 whose headers hdr sets,
// and returns when it was answered.
func (p *hostileProxy) answer429(t *testing.T, hdr func(h http.Header)) time.Time {
	t.Helper()
	p.arm(func(w http.ResponseWriter) {
		h := w.Header()
		h.Set("Content-Type", "application/json")
		hdr(h)
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"message":"Too Many Requests","code":429}}`))
	})
	select {
	case at := <-p.hit:
		return at
	case <-time.After(30 * time.Second):
		t.Fatal("no search within 30 s")
	}
	return time.Time{}
}

// between counts the requests that arrived in [from, to).
func (p *hostileProxy) between(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.calls {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// TestFaultRestartInsideRetryAfter: a 429 of the short period (not
// the daily quota) asks for a wait with Retry-After; the watcher is killed
// (-9) 4 s into it and started again. The restarted process makes no call
// before the wait ends, and resumes after it. Three hostile variants of
// the 429: no Date header; a Date two hours ahead with the period's
// -Calls-Reset on the true clock (before the Date); a Retry-After of 0
// with a -Calls-Reset in the past (the pacer's default block applies).
func TestFaultRestartInsideRetryAfter(t *testing.T) {
	const wait = 20 * time.Second
	for _, tc := range []struct {
		name  string
		retry string
		hdr   func(h http.Header, now time.Time)
		want  time.Duration // the wait the 429 binds to (at least)
	}{
		{"no Date", "20", func(h http.Header, now time.Time) {
			h["Date"] = nil
		}, wait},
		{"Date ahead, reset before it", "20", func(h http.Header, now time.Time) {
			h.Set("Date", now.Add(2*time.Hour).UTC().Format(http.TimeFormat))
			h.Set(plenty.PrefixShort+"-Calls-Reset", strconv.FormatInt(now.Add(5*time.Second).Unix(), 10))
		}, wait},
		{"Retry-After 0, reset past", "0", func(h http.Header, now time.Time) {
			h.Set("Date", now.UTC().Format(http.TimeFormat))
			h.Set(plenty.PrefixShort+"-Calls-Reset", strconv.FormatInt(now.Add(-time.Minute).Unix(), 10))
		}, 20 * time.Second}, // PacerConfig.DefaultBlock
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFaultEnv(t, plentysim.Config{})
			p := f.hostileProxy()
			f.start()
			waitReady(t, f.addr)
			f.mutate(5)
			at := p.answer429(t, func(h http.Header) {
				h.Set("Retry-After", tc.retry)
				h.Set(plenty.PrefixShort+"-Limit", "200")
				h.Set(plenty.PrefixShort+"-Calls-Left", "0")
				h.Set(plenty.PrefixShort+"-Decay", "0")
				tc.hdr(h, time.Now())
			})
			time.Sleep(4 * time.Second)
			f.kill()
			restarted := time.Now()
			f.start()
			end := at.Add(tc.want)
			time.Sleep(time.Until(end))
			inside := p.between(restarted, end.Add(-time.Second))
			if inside != 0 {
				t.Errorf("the restarted process made %d calls inside the %v wait the 429 asked for (it ends %v after the restart)", inside, tc.want, end.Sub(restarted).Round(time.Second))
			}
			f.quiesce()
			n := f.check()
			t.Logf("429 (%s), kill -9 4 s into the wait: %d calls inside it after the restart, %d events checked", tc.name, inside, n)
		})
	}
}

// TestFaultOneSecondTokensLimitOne: the service gives tokens that
// live 1 s (expires_in 1) and allows one session (max_current_sessions
// 1); the watcher is killed (-9) and restarted under load. Every change is
// published once, never a second session, no session-limit 429.
func TestFaultOneSecondTokensLimitOne(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{TokenTTL: time.Second, MaxSessions: 1})
	f.start()
	waitReady(t, f.addr)
	f.mutate(5)
	time.Sleep(scale(8*time.Second, 60*time.Second))
	f.kill()
	f.start()
	time.Sleep(scale(8*time.Second, 60*time.Second))
	f.quiesce()
	n := f.check()
	st := f.sim.Stats()
	if st.MaxConcurrentSessions > 1 || st.SessionLimit429 != 0 {
		t.Errorf("max concurrent sessions %d, session-limit 429s %d; want 1 and 0", st.MaxConcurrentSessions, st.SessionLimit429)
	}
	t.Logf("tokens of 1 s, session limit 1: %d events checked; %d calls: %d searches, %d logins, %d refreshes, %d 401s, %d 429s",
		n, st.Calls, st.SearchCalls, st.LoginCalls, st.RefreshCalls, st.Unauthorized401, st.Throttled429)
}

// TestFaultCorruptRecords: every record of the state file is
// unreadable (bytes that are not JSON, JSON of the wrong shape) and the
// quarantine holds an unreadable entry of a real order and one of an order
// the service does not have. The watcher, started on that file, reads
// each as "nothing known": no crash, no stall, every change published once.
func TestFaultCorruptRecords(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{})
	f.start()
	waitReady(t, f.addr)
	f.mutate(5)
	time.Sleep(3 * time.Second)
	if err, _ := f.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	db, err := bolt.Open(f.state, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	victim := f.sim.Orders()[7].ID
	err = db.Update(func(tx *bolt.Tx) error {
		recs := tx.Bucket([]byte("records"))
		for name, v := range map[string]string{
			"budget": "\x00\xffnot json{", "waits": `{"waits":[{"until":"yesterday"}]}`, "sessions": `[1,2,3]`,
			"publisher": `{"sent_through":-1}`, "clock": "\x01", "timings": `{"`,
		} {
			if err := recs.Put([]byte(name), []byte(v)); err != nil {
				return err
			}
		}
		q := tx.Bucket([]byte("quarantine"))
		if err := q.Put(binary.BigEndian.AppendUint64(nil, uint64(victim)), []byte("\xfe garbage")); err != nil {
			return err
		}
		return q.Put(binary.BigEndian.AppendUint64(nil, 999999999), []byte(`{"reason":"from an older run"}`))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(watcherBin(t), "state")
	cmd.Env = f.env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("watcher state on the file: %v\n%s", err, tail(string(out), 1000))
	}
	f.start()
	time.Sleep(5 * time.Second)
	f.quiesce()
	n := f.check()
	base := "http://" + f.addr
	if code, body := get(base + "/state"); code != 200 {
		t.Errorf("GET /state = %d %s", code, tail(body, 500))
	}
	waitFor(t, "the unreadable quarantine entries to be released", 60*time.Second, func() bool {
		_, m := get(base + "/metrics")
		return metricValue(m, "orderwatch_quarantined_orders") == 0
	})
	t.Logf("every record unreadable, 2 unreadable quarantine entries: %d events checked, quarantine emptied", n)
}

// TestFaultQuarantineHealsWhileDown: an order is quarantined, its
// slice committed with the watermark past it; the watcher is killed (-9)
// and, while it is down, the order's entry becomes readable again (as is,
// or with a further change), past the overlap of any later window. The
// restarted process publishes the order's current state once: nothing lost
// for the bad order, nothing doubled for the others.
func TestFaultQuarantineHealsWhileDown(t *testing.T) {
	for _, changed := range []bool{false, true} {
		name := "unchanged"
		if changed {
			name = "changed while down"
		}
		t.Run(name, func(t *testing.T) {
			f := newFaultEnv(t, plentysim.Config{})
			f.start()
			waitReady(t, f.addr)
			f.mutate(5)
			base := "http://" + f.addr
			quarantined := func() float64 {
				_, m := get(base + "/metrics")
				return metricValue(m, "orderwatch_quarantined_orders")
			}
			victim := f.sim.Orders()[42]
			if err := f.sim.Corrupt(victim.ID, plentysim.CorruptStatus); err != nil {
				t.Fatal(err)
			}
			statuses := []string{"8", "9"}
			if victim.StatusID == "8" || victim.StatusID == "9" {
				statuses = []string{"11.1", "7.01"}
			}
			if _, err := f.sim.SetStatus(victim.ID, statuses[0]); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the order to be quarantined", 30*time.Second, func() bool { return quarantined() == 1 })
			time.Sleep(2 * time.Second) // later sweeps commit the watermark past its slice
			f.kill()
			if err := f.sim.Corrupt(victim.ID, plentysim.CorruptNone); err != nil {
				t.Fatal(err)
			}
			if changed {
				if _, err := f.sim.SetStatus(victim.ID, statuses[1]); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(5 * time.Second) // past settle and overlap (harness: 1 s, 3 s)
			f.start()
			waitFor(t, "the order to leave the quarantine", 90*time.Second, func() bool { return quarantined() == 0 })
			f.quiesce()
			n := f.check()
			if got := f.eventsOf(victim.ID); got != 1 {
				t.Errorf("%d events of the healed order, want 1", got)
			}
			t.Logf("quarantined order healed while the watcher was down (%s): released after the restart, 1 event of it, %d events checked", name, n)
		})
	}
}

// TestFaultPreviousSchemaOutbox: the watcher of the previous version
// (schema 1: no records, no quarantine) was killed (-9) with events in its
// outbox whose acknowledgements were lost, and the stream's duplicate
// window (2 s) passes before this version starts on the file, with NATS
// down at its start. No send mark: every entry left in the outbox is
// looked up before it goes out again; none is stored twice, none is lost.
// Without the lease: with it (the default), a file whose records were
// dropped is a new replica, whose takeover undoes its outbox and mirrors
// the stream instead (TestFaultStandby covers that path).
func TestFaultPreviousSchemaOutbox(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{}, "WATCHER_LEASE=false")
	const window = 2 * time.Second
	f.killWithAcksLost(window)
	// Back to schema 1: the records (the send mark among them) and the
	// quarantine did not exist.
	db, err := bolt.Open(f.state, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range []string{"records", "quarantine"} {
			if err := tx.DeleteBucket([]byte(b)); err != nil {
				return err
			}
		}
		return tx.Bucket([]byte("meta")).Put([]byte("schema_version"), binary.BigEndian.AppendUint64(nil, 1))
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	f.ns.Shutdown()
	f.ns.WaitForShutdown()
	f.start() // NATS is down at the start
	time.Sleep(window + 3*time.Second)
	f.startNATS()
	n, m := f.checkLookedUp()
	t.Logf("schema-1 file, lost acks, kill -9, NATS down at the start for %v (window %v): %d events checked, 0 doubled; look-ups: %v stored, %v not stored",
		window+3*time.Second, window, n, metricValue(m, `orderwatch_publish_dedup_lookups_total{result="stored"}`),
		metricValue(m, `orderwatch_publish_dedup_lookups_total{result="not_stored"}`))
}

// operatorStream creates (or updates) the stream ORDERS as an operator
// would, with the duplicate window given; noAck makes it store messages
// without answering, as if every PubAck were lost.
func (f *faultEnv) operatorStream(window time.Duration, noAck bool) {
	f.t.Helper()
	nc, err := nats.Connect(f.ns.ClientURL())
	if err != nil {
		f.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: jetstream.FileStorage, Duplicates: window, NoAck: noAck,
	}); err != nil {
		f.t.Fatal(err)
	}
}

// waitStoredUnacked waits until the stream holds n events (stored without
// an acknowledgement when the stream was created with noAck).
func (f *faultEnv) waitStoredUnacked(n int) {
	f.t.Helper()
	waitFor(f.t, "events stored without an acknowledgement", 60*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, got := f.stream(ctx)
		return got >= n
	})
}

// TestFaultCheckInsideWaits: the watcher is killed (-9) inside a
// wait the service asked for, and an operator runs `watcher check` on its
// state file before starting it again: check is bound by the persisted
// waits like `watcher run` (no call into a 429's Retry-After, no login
// into a session-limit hold; it says why it did not try).
func TestFaultCheckInsideWaits(t *testing.T) {
	check := func(t *testing.T, f *faultEnv) string {
		t.Helper()
		cmd := exec.Command(watcherBin(t), "check")
		cmd.Env = f.env
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	t.Run("Retry-After", func(t *testing.T) {
		f := newFaultEnv(t, plentysim.Config{})
		p := f.hostileProxy()
		f.start()
		waitReady(t, f.addr)
		at := p.answer429(t, func(h http.Header) { h.Set("Retry-After", "60") })
		time.Sleep(time.Second)
		f.kill()
		from := time.Now()
		out := check(t, f)
		if n := p.between(from, at.Add(59*time.Second)); n != 0 {
			t.Errorf("watcher check made %d calls inside the 60 s Retry-After:\n%s", n, out)
		}
		t.Logf("watcher check inside a 429's wait:\n%s", out)
	})
	t.Run("session limit", func(t *testing.T) {
		f := newFaultEnv(t, plentysim.Config{})
		f.otherSessions(3)
		f.start()
		waitFor(t, "the session-limit 429", 30*time.Second, func() bool { return f.sim.Stats().SessionLimit429 == 1 })
		time.Sleep(time.Second)
		f.kill()
		out := check(t, f) // inside the pacer's wait for a 429 naming none (20 s)
		time.Sleep(21 * time.Second)
		out += check(t, f) // past it: inside the login guard's hold (5 min)
		if st := f.sim.Stats(); st.SessionLimit429 != 1 || st.LoginCalls != 4 {
			t.Errorf("after watcher check: %d logins, %d session-limit 429s; want 4 (3 others and the watcher's) and 1:\n%s", st.LoginCalls, st.SessionLimit429, out)
		}
		t.Logf("watcher check inside a session-limit hold:\n%s", out)
	})
}

// otherSessions logs the shop's other integrations in n times: they hold n
// sessions of the service's limit.
func (f *faultEnv) otherSessions(n int) {
	f.t.Helper()
	for range n {
		other, err := plenty.New(plenty.Config{BaseURL: f.srv.URL, Username: "demo", Password: "demo"})
		if err != nil {
			f.t.Fatal(err)
		}
		if err := other.Login(f.t.Context()); err != nil {
			f.t.Fatal(err)
		}
	}
}
