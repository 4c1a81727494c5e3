package faults

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
// login settings, sessions living 10.5 min (so that the watcher renews half
// a minute after each login):
//   - the service rejects every new token for 20 s (their sessions stay
//     open): the watcher's first token is refused, and the watcher is
//     killed (-9) inside the wait before it tries that token again;
//   - once served, every change is checked in the stream;
//   - a renewal's answer is lost (the session goes on under tokens the
//     watcher never got; its old token then answers 401), and so is the
//     answer of the login after it: two sessions without a token, so the
//     watcher must not log in again until the first has ended (10.5 min
//     after the renewal). It is killed inside that hold and restarted.
//
// The watcher counts every session it may hold, so it never holds more
// than limit-1 = 2 (one stays for the shop's other integrations), and never
// runs into the limit. Short: 15 s of the hold on each side of the kill are
// watched; with -fault-long the test waits for the login after the hold.
func TestFaultSessionsRejectedTokensLostAnswers(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{TokenTTL: 10*time.Minute + 30*time.Second})
	f.sim.RejectNewTokens(20*time.Second, false)
	t.Cleanup(func() {
		if t.Failed() {
			f.mu.Lock()
			t.Logf("watcher log (tail):\n%s", tail(f.logs.String(), 6000))
			f.mu.Unlock()
		}
	})
	start := time.Now()
	f.start()
	f.mutate(5)
	waitFor(t, "the first fresh token to be rejected", time.Minute, func() bool { return f.sim.Stats().Unauthorized401 >= 1 })
	time.Sleep(time.Second)
	f.kill() // inside the wait before the rejected token is tried again
	f.start()
	waitFor(t, "the watcher to be served with its token", 2*time.Minute, func() bool {
		code, _ := get("http://" + f.addr + "/readyz")
		return code == 200
	})
	if st := f.sim.Stats(); st.LoginCalls != 1 {
		t.Errorf("%d logins while the fresh token was rejected for 20 s (and a restart): want 1, the same token tried again", st.LoginCalls)
	}
	time.Sleep(2 * time.Second)
	f.quiesce()
	n := f.check()

	f.sim.FailRefreshes(1)
	if err := f.sim.FailLogins(1, plentysim.LoginDrop); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a renewal whose answer is lost, and a login whose answer is lost", 2*time.Minute, func() bool {
		st := f.sim.Stats()
		return st.RefreshCalls >= 1 && st.LoginCalls >= 2
	})
	renewed := time.Now()
	hold := scale(15*time.Second, 0)
	time.Sleep(hold)
	f.kill()
	if unsure, nb := f.sessionsRecord(); unsure != 2 {
		t.Errorf("the state file counts %d sessions without a token (logins held until %v), want 2: the lost renewal's and the lost login's", unsure, nb)
	}
	f.start()
	if *faultLong {
		waitFor(t, "the login after the lost renewal's session ended", 12*time.Minute, func() bool { return f.sim.Stats().LoginCalls >= 3 })
		waitReady(t, f.addr)
		if since := time.Since(renewed); since < 10*time.Minute {
			t.Errorf("logged in again %v after the lost renewal, before its session ended (10.5 min)", since.Round(time.Second))
		}
	} else {
		time.Sleep(hold)
		if st := f.sim.Stats(); st.LoginCalls != 2 {
			t.Errorf("%d logins while two sessions without a token are open: want none after the first 2", st.LoginCalls)
		}
	}
	st := f.sim.Stats()
	if st.SessionLimit429 != 0 || st.MaxConcurrentSessions > 2 {
		t.Errorf("%d session-limit 429s, at most %d sessions at once: want 0 and at most 2 (the limit 3 less one for the shop's other integrations)",
			st.SessionLimit429, st.MaxConcurrentSessions)
	}
	t.Logf("fresh tokens rejected for 20 s, lost renewal and login answers, 2 kills: %d logins (at %s), %d renewals, %d 401s, at most %d sessions at once, %d session-limit 429s, %d events checked, in %v",
		st.LoginCalls, f.loginTimes(start), st.RefreshCalls, st.Unauthorized401, st.MaxConcurrentSessions, st.SessionLimit429, n, time.Since(start).Round(time.Second))
}

// The shop's other integrations hold all 3 sessions: the watcher's login
// gets the session-limit 429 and waits (5 min by default). Killed (-9) and
// restarted inside that wait, it makes no login before the wait ends, even
// after the sessions are free again. Short: 30 s of the wait are watched;
// -fault-long waits for the login after it.
func TestFaultSessionLimitWaitRestart(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{})
	f.otherSessions(3)
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
