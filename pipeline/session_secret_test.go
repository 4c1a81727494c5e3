package pipeline

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/replica"
)

// tokenTap serves the simulator and keeps every token it hands out or is
// shown (access tokens of requests, both tokens of login and refresh
// answers).
type tokenTap struct {
	sim    *plentysim.Server
	mu     sync.Mutex
	tokens map[string]bool
	// onLogin, when set, runs after each login's answer is written.
	onLogin atomic.Pointer[func()]
}

func (tp *tokenTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tp.mu.Lock()
	if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && a != "" {
		tp.tokens[a] = true
	}
	tp.mu.Unlock()
	if !strings.HasPrefix(r.URL.Path, "/rest/login") {
		tp.sim.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	tp.sim.ServeHTTP(rec, r)
	var body map[string]any
	if json.Unmarshal(rec.Body.Bytes(), &body) == nil {
		tp.mu.Lock()
		for _, k := range []string{"access_token", "refresh_token", "accessToken", "refreshToken"} {
			if s, ok := body[k].(string); ok && s != "" {
				tp.tokens[s] = true
			}
		}
		tp.mu.Unlock()
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	if f := tp.onLogin.Load(); f != nil && r.URL.Path == "/rest/login" {
		w.(http.Flusher).Flush()
		(*f)()
	}
}

func (tp *tokenTap) seen() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out []string
	for s := range tp.tokens {
		out = append(out, s)
	}
	return out
}

// tappedShop is restingShop with short sessions (renewed every few
// seconds) behind a tokenTap.
func tappedShop(t *testing.T, ttl time.Duration) (*plentysim.Server, *tokenTap, string, string, func(string, int)) {
	t.Helper()
	sim := plentysim.New(plentysim.Config{Seed: 11, TokenTTL: ttl})
	sim.Generate(30, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Minute))
	tap := &tokenTap{sim: sim, tokens: map[string]bool{}}
	srv := httptest.NewServer(tap)
	t.Cleanup(srv.Close)
	sweeps := func(who string, n int) {
		from := sim.Stats().SearchCalls
		testnats.WaitFor(t, who+" calling the shop", 60*time.Second, func() bool { return sim.Stats().SearchCalls >= from+n })
	}
	return sim, tap, srv.URL, testnats.Start(t).ClientURL(), sweeps
}

// runLogged is runReplica logging at debug level into logs, with a lease
// of 4 s (takeovers within seconds).
func runLogged(t *testing.T, cfg *Config, instance string, logs *e2e.LockedBuffer) *replicaRun {
	t.Helper()
	cfg.LeaseTTL = 4 * time.Second
	return runReplicaLogged(t, cfg, instance, replica.Tuning{}, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

// natsHolds returns what of secrets any message of any stream on the
// server at url holds (KV buckets, object stores, the events).
func natsHolds(t *testing.T, url string, secrets []string) []string {
	t.Helper()
	js := testnats.JetStream(t, url)
	var found []string
	names := js.StreamNames(t.Context())
	for name := range names.Name() {
		s, err := js.Stream(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && seq > 0; seq++ {
			m, err := s.GetMsg(t.Context(), seq)
			if err != nil {
				continue // deleted
			}
			raw := append([]byte(m.Subject), m.Data...)
			for k, v := range m.Header {
				raw = append(raw, []byte(k+strings.Join(v, ""))...)
			}
			for _, sec := range secrets {
				if bytes.Contains(raw, []byte(sec)) {
					found = append(found, name+"/"+m.Subject+": "+sec[:12]+"...")
				}
			}
		}
	}
	return found
}

// TestSessionTokensStayOutOfLogsAndNATS: two replicas of a shop whose
// sessions last 10 s (renewed every 5 s), the service ending the session
// once (a login again), the active killed right after a renewal and the
// standby taking over: no access or refresh token the service handed out
// appears in either replica's log (debug level) or in any message NATS
// holds (the sealed session in the checkpoint and the group's limits is
// sealed with the shop's password). And the takeover right after a
// renewal costs at most one login, with no loop: the successor's calls
// go on with no further login.
func TestSessionTokensStayOutOfLogsAndNATS(t *testing.T) {
	sim, tap, srvURL, url, sweeps := tappedShop(t, 10*time.Second)
	var logs0, logs1 e2e.LockedBuffer
	r0 := runLogged(t, testConfig(t, srvURL, url), "r0", &logs0)
	testnats.WaitFor(t, "r0 active", 60*time.Second, r0.w.Working)
	sweeps("r0", 3)
	r1 := runLogged(t, testConfig(t, srvURL, url), "r1", &logs1)
	testnats.WaitFor(t, "r1 a standby", 60*time.Second, func() bool { return r1.w.rep.Report().Holder != "" })
	sim.ExpireSessions()
	testnats.WaitFor(t, "r0's new login", 60*time.Second, func() bool { return sim.Stats().LoginCalls == 2 })
	refreshes := sim.Stats().RefreshCalls
	testnats.WaitForEvery(t, "r0's renewal", 60*time.Second, time.Millisecond, func() bool { return sim.Stats().RefreshCalls > refreshes })
	r0.kill() // right after the renewal's answer: the group may hold the session's tokens before it
	testnats.WaitFor(t, "r1 active", 60*time.Second, r1.w.Working)
	sweeps("r1", 2)
	logins := sim.Stats().LoginCalls
	sweeps("r1", 3)
	s := sim.Stats()
	t.Logf("logins %d (2 before the kill), refreshes %d, 401s %d, session-limit 429s %d", s.LoginCalls, s.RefreshCalls, s.Unauthorized401, s.SessionLimit429)
	if s.LoginCalls > 3 || s.LoginCalls != logins || s.SessionLimit429 != 0 {
		t.Errorf("the takeover after a renewal: %d logins (%d three sweeps after it), %d session-limit 429s; want at most 3, none more after, no 429", s.LoginCalls, logins, s.SessionLimit429)
	}
	secrets := tap.seen()
	if len(secrets) < 4 {
		t.Fatalf("only %d tokens seen", len(secrets))
	}
	for name, l := range map[string]*e2e.LockedBuffer{"r0": &logs0, "r1": &logs1} {
		for _, sec := range secrets {
			if strings.Contains(l.String(), sec) {
				t.Errorf("%s's log holds a token (%s...)", name, sec[:12])
			}
		}
	}
	if found := natsHolds(t, url, secrets); len(found) > 0 {
		t.Errorf("NATS holds tokens in clear: %v", found)
	}
}

// TestKilledInsideALoginThenRestarted: the service ends the active r0's
// session; r0 logs in again and is killed as the login's answer arrives
// (its state file may keep the new token while the group's limits never
// get its sealed copy). r1 takes over: with the ended session it is
// refused once and logs in (allowed: one login more); r0, started again
// on its state file, stands by, and takes the shop back when r1 dies: it
// goes on with the group's session, no login, no loop, no session-limit
// refusal.
func TestKilledInsideALoginThenRestarted(t *testing.T) {
	sim, tap, srvURL, url, sweeps := tappedShop(t, 24*time.Hour)
	cfg0 := testConfig(t, srvURL, url)
	var logs0, logs1, logs2 e2e.LockedBuffer
	r0 := runLogged(t, cfg0, "r0", &logs0)
	testnats.WaitFor(t, "r0 active", 60*time.Second, r0.w.Working)
	sweeps("r0", 3)
	r1 := runLogged(t, testConfig(t, srvURL, url), "r1", &logs1)
	testnats.WaitFor(t, "r1 a standby", 60*time.Second, func() bool { return r1.w.rep.Report().Holder != "" })
	killed := make(chan struct{})
	var once sync.Once
	kill := func() { once.Do(func() { go func() { r0.kill(); close(killed) }() }) }
	tap.onLogin.Store(&kill)
	sim.ExpireSessions()
	<-killed
	tap.onLogin.Store(nil)
	testnats.WaitFor(t, "r1 active", 60*time.Second, r1.w.Working)
	sweeps("r1", 3)
	r0b := runLogged(t, cfg0, "r0", &logs2)
	testnats.WaitFor(t, "r0 a standby again", 60*time.Second, func() bool { return r0b.w.rep.Report().Holder != "" })
	sweeps("r1", 2)
	s := sim.Stats()
	r1.kill()
	testnats.WaitFor(t, "r0 active again", 60*time.Second, r0b.w.Working)
	sweeps("r0", 5)
	e := sim.Stats()
	t.Logf("logins %d (%d before r0's return), 401s %d (%d), session-limit 429s %d", e.LoginCalls, s.LoginCalls, e.Unauthorized401, s.Unauthorized401, e.SessionLimit429)
	if s.LoginCalls > 3 || e.LoginCalls != s.LoginCalls || e.SessionLimit429 != 0 {
		t.Errorf("%d logins before r0's return (want at most 3), %d after, %d session-limit 429s", s.LoginCalls, e.LoginCalls, e.SessionLimit429)
	}
	if e.Unauthorized401 != s.Unauthorized401 {
		t.Errorf("r0, back, used a stale session: %d 401s more", e.Unauthorized401-s.Unauthorized401)
	}
}
