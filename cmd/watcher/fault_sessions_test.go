package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/state"
)

// sessionsRecord reads the login guard the watcher left in its state file
// (the process is stopped: the file is not locked).
func (f *faultEnv) sessionsRecord() (unsure int, notBefore time.Time) {
	f.t.Helper()
	st, err := state.Open(f.state, state.Options{Timeout: 2 * time.Second})
	if err != nil {
		f.t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Records()
	if err != nil {
		f.t.Fatal(err)
	}
	var r struct {
		NotBefore  time.Time   `json:"not_before"`
		UnsureEnds []time.Time `json:"unsure_ends"`
	}
	if raw, ok := recs[plenty.SessionsRecord]; ok {
		if err := json.Unmarshal(raw, &r); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, end := range r.UnsureEnds {
		if end.After(time.Now()) {
			unsure++
		}
	}
	return unsure, r.NotBefore
}

// At the service's default session limit (3) and the watcher's default
// login settings: the service rejects every new token for 20 s (its
// sessions stay open), the watcher is killed (-9) while it waits to try its
// rejected token again, then a renewal's answer is lost (the session goes
// on under tokens the watcher never got), and the watcher is killed again.
// Sessions live 10.5 min so that the watcher renews every half minute.
// The watcher counts every session it may hold, so it never holds more
// than limit-1 = 2 (one stays for the shop's other integrations), and
// never runs into the limit. With -fault-long a second renewal answer is
// lost: two sessions without a token are open, and the watcher waits for
// the first to end (~10 min) instead of opening a third.
func TestFaultSessionsRejectedTokensLostAnswers(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{TokenTTL: 10*time.Minute + 30*time.Second})
	f.sim.RejectNewTokens(20*time.Second, false)
	start := time.Now()
	f.start()
	f.mutate(5)
	waitFor(t, "the first fresh token to be rejected", 30*time.Second, func() bool { return f.sim.Stats().Unauthorized401 >= 1 })
	time.Sleep(time.Second)
	f.kill() // inside the wait before the rejected token is tried again
	f.start()
	waitFor(t, "the watcher to be served with its first token", 2*time.Minute, func() bool {
		code, _ := get("http://" + f.addr + "/readyz")
		return code == 200
	})
	if st := f.sim.Stats(); st.LoginCalls != 1 {
		t.Errorf("%d logins while the fresh token was rejected for 20 s (and a restart): want 1, the same token tried again", st.LoginCalls)
	}

	f.sim.FailRefreshes(1)
	waitFor(t, "a renewal whose answer is lost and a login after it", 2*time.Minute, func() bool {
		st := f.sim.Stats()
		return st.RefreshCalls >= 1 && st.LoginCalls >= 2
	})
	waitReady(t, f.addr)
	f.kill()
	if unsure, _ := f.sessionsRecord(); unsure != 1 {
		t.Errorf("the state file counts %d sessions without a token after a lost renewal answer, want 1", unsure)
	}
	f.start()
	waitReady(t, f.addr)
	if *faultLong {
		f.sim.FailRefreshes(1)
		waitFor(t, "a second lost renewal and the login after both lost sessions ended", 15*time.Minute, func() bool {
			return f.sim.Stats().LoginCalls >= 3
		})
		waitReady(t, f.addr)
	}
	time.Sleep(2 * time.Second)
	f.quiesce()
	n := f.check()
	st := f.sim.Stats()
	if st.SessionLimit429 != 0 || st.MaxConcurrentSessions > 2 {
		t.Errorf("%d session-limit 429s, at most %d sessions at once: want 0 and at most 2 (the limit 3 less one for the shop's other integrations)",
			st.SessionLimit429, st.MaxConcurrentSessions)
	}
	t.Logf("rejected fresh tokens, lost renewal answers, 2 kills: %d logins (at %s), %d renewals, %d 401s, at most %d sessions at once, %d session-limit 429s, %d events checked in %v",
		st.LoginCalls, f.loginTimes(start), st.RefreshCalls, st.Unauthorized401, st.MaxConcurrentSessions, st.SessionLimit429, n, time.Since(start).Round(time.Second))
}

// The shop's other integrations hold all 3 sessions: the watcher's login
// gets the session-limit 429 and waits (5 min by default). Killed (-9) and
// restarted inside that wait, it makes no login before the wait ends, even
// after the sessions are free again. Short: 30 s of the wait are watched;
// -fault-long waits for the login after it.
func TestFaultSessionLimitWaitRestart(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{})
	for range 3 {
		other, err := plenty.New(plenty.Config{BaseURL: f.srv.URL, Username: "demo", Password: "demo"})
		if err != nil {
			t.Fatal(err)
		}
		if err := other.Login(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	f.start()
	waitFor(t, "the session-limit 429", 30*time.Second, func() bool { return f.sim.Stats().SessionLimit429 == 1 })
	limited := time.Now()
	time.Sleep(2 * time.Second)
	f.kill()
	if _, nb := f.sessionsRecord(); nb.Before(limited.Add(4 * time.Minute)) {
		t.Errorf("the state file holds logins until %v, want about 5 min after the 429", nb)
	}
	f.sim.ExpireSessions() // the other integrations are gone: only the wait holds the watcher back
	f.start()
	watch := scale(30*time.Second, 0)
	if *faultLong {
		waitFor(t, "the login after the wait", 6*time.Minute, func() bool { return f.sim.Stats().LoginCalls >= 5 })
		if after := time.Since(limited); after < 5*time.Minute-2*time.Second {
			t.Errorf("logged in %v after the session-limit 429, inside the 5 min wait", after)
		}
		waitReady(t, f.addr)
	} else {
		time.Sleep(watch)
	}
	st := f.sim.Stats()
	logins := st.LoginCalls - 3
	if (!*faultLong && logins != 1) || (*faultLong && logins != 2) || st.SessionLimit429 != 1 {
		t.Errorf("%d logins of the watcher, %d session-limit 429s: want 1 login (2 after the wait) and only the 429 that started the wait", logins, st.SessionLimit429)
	}
	t.Logf("restart inside a session-limit wait: %d watcher logins, %d session-limit 429s, in %v", logins, st.SessionLimit429, time.Since(start).Round(time.Second))
}
