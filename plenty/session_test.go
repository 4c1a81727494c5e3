package plenty_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/state"
)

// openState opens a real state file; it is closed at the end of the test.
func openState(t *testing.T, path string) *state.Store {
	t.Helper()
	st, err := state.Open(path, state.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// process is one watcher process's client over a real state file: token and
// login guard in the file, as the daemon wires them.
func (e *env) process(t *testing.T, st *state.Store, mod func(*plenty.Config)) *plenty.Client {
	t.Helper()
	return e.client(t, func(c *plenty.Config) {
		c.Tokens, c.Sessions = st, st
		if mod != nil {
			mod(c)
		}
	})
}

// restart closes the state file and opens it again (a new process).
func restart(t *testing.T, st *state.Store) *state.Store {
	t.Helper()
	path := st.Path()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return openState(t, path)
}

// A service that rejects every new token for a while (its nodes do not know
// it yet) while the session is open: the client tries the same token again
// after escalating waits instead of logging in again, and once it gives a
// token up it counts its session until the token's expiry. With the
// service's default limit of 3 and tokens that live a day, never more than
// 2 sessions, no session-limit 429.
func TestRejectedFreshTokens(t *testing.T) {
	for _, tc := range []struct {
		name       string
		window     time.Duration
		forever    bool
		wantLogins int
	}{
		{"rejected for a minute", time.Minute, false, 1},         // the same token works after the window
		{"rejected for good, 10 min", 10 * time.Minute, true, 2}, // one token given up, the next login after the window
		{"rejected for good, an hour", time.Hour, true, 3},       // two given up: the third login waits for the first session's end
		{"rejected for good, two days", 48 * time.Hour, true, 5}, // two given up a day, then a good one
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, plentysim.Config{})
			e.sim.Generate(10, e.clk.Now().Add(-time.Hour), e.clk.Now())
			e.sim.RejectNewTokens(tc.window, tc.forever)
			c := e.client(t, nil)
			took := sweepUntilServed(t, e, c)
			st := e.sim.Stats()
			if st.SessionLimit429 != 0 || st.MaxConcurrentSessions > 2 || st.LoginCalls != tc.wantLogins {
				t.Errorf("%d session-limit 429s, at most %d sessions at once, %d logins: want 0, at most 2, %d", st.SessionLimit429, st.MaxConcurrentSessions, st.LoginCalls, tc.wantLogins)
			}
			t.Logf("served after %v: %d logins, %d 401s, at most %d sessions", took, st.LoginCalls, st.Unauthorized401, st.MaxConcurrentSessions)
		})
	}
}

// A renewal whose answer is lost renews the session under tokens the client
// never gets (the simulator's refresh rotates the tokens; the old one then
// answers 401). That session is counted until it must have expired: with a
// lost login answer after it, the client holds 2 sessions it cannot use and
// waits for one to end instead of opening a third.
func TestLostRefreshAnswerCounted(t *testing.T) {
	e := newEnv(t, plentysim.Config{TokenTTL: time.Hour, MaxSessions: 3})
	c := e.client(t, nil)
	search(t, c, order.Query{})
	e.sim.FailRefreshes(1)
	if err := e.sim.FailLogins(1, plentysim.LoginDrop); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(55 * time.Minute) // inside RenewBefore
	took := sweepUntilServed(t, e, c)
	st := e.sim.Stats()
	if st.SessionLimit429 != 0 || st.MaxConcurrentSessions > 2 || st.RefreshCalls != 1 || st.LoginCalls != 3 {
		t.Errorf("stats %+v: want no session-limit 429, at most 2 sessions, 1 refresh, 3 logins", st)
	}
	if took < 50*time.Minute {
		t.Errorf("served after %v: two sessions without a token were open for about an hour", took)
	}
}

// What holds logins back binds the next process: a session-limit wait, the
// sessions lost answers may have opened, and a fresh token the service
// rejected. The restarted client makes no login before the old one would
// have.
func TestLoginGuardSurvivesRestart(t *testing.T) {
	t.Run("session limit", func(t *testing.T) {
		e := newEnv(t, plentysim.Config{MaxSessions: 3})
		for range 3 {
			other := e.client(t, func(c *plenty.Config) { c.Tokens = &plenty.MemoryTokenStore{} })
			if err := other.Login(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		st := openState(t, filepath.Join(t.TempDir(), "state.db"))
		_, err := e.process(t, st, nil).SearchOrders(context.Background(), order.Query{})
		if !errors.Is(err, plenty.ErrSessionLimit) {
			t.Fatalf("err = %v, want the session limit", err)
		}
		e.clk.Advance(time.Minute)
		st = restart(t, st)
		_, err = e.process(t, st, nil).SearchOrders(context.Background(), order.Query{})
		var held *plenty.LoginHeldError
		if !errors.As(err, &held) || !errors.Is(err, plenty.ErrSessionLimit) || !held.Until.Equal(e.clk.Now().Add(4*time.Minute)) {
			t.Fatalf("after a restart 1 min into the 5 min wait: err = %v, want held for 4 more minutes by the session limit", err)
		}
		if n := e.sim.Stats().LoginCalls; n != 4 {
			t.Errorf("%d logins, want 4 (3 others, 1 refused, none after the restart)", n)
		}
		// A local clock stepped back an hour: the wait is not longer than
		// the one announced.
		st = restart(t, st)
		back := func() time.Time { return e.clk.Now().Add(-time.Hour) }
		_, err = e.process(t, st, func(c *plenty.Config) { c.Now = back }).SearchOrders(context.Background(), order.Query{})
		if !errors.As(err, &held) || held.Until.After(back().Add(5*time.Minute)) {
			t.Fatalf("clock stepped back an hour: err = %v, want a wait of at most the announced 5 min", err)
		}
	})
	t.Run("unsure sessions", func(t *testing.T) {
		e := newEnv(t, plentysim.Config{MaxSessions: 3, TokenTTL: time.Hour})
		if err := e.sim.FailLogins(2, plentysim.LoginDrop); err != nil {
			t.Fatal(err)
		}
		st := openState(t, filepath.Join(t.TempDir(), "state.db"))
		for range 2 {
			if _, err := e.process(t, st, nil).SearchOrders(context.Background(), order.Query{}); !errors.Is(err, plenty.ErrAnswerLost) {
				t.Fatalf("err = %v, want a lost answer", err)
			}
			e.clk.Advance(10 * time.Minute) // past the spacing
			st = restart(t, st)
		}
		_, err := e.process(t, st, nil).SearchOrders(context.Background(), order.Query{})
		var held *plenty.LoginHeldError
		if !errors.As(err, &held) || held.Until.Before(e.clk.Now().Add(30*time.Minute)) {
			t.Fatalf("err = %v: want logins held until the first lost session ends (40 min from now)", err)
		}
		sweepUntilServed(t, e, e.process(t, st, nil))
		if s := e.sim.Stats(); s.MaxConcurrentSessions > 2 || s.SessionLimit429 != 0 || s.LoginCalls != 3 {
			t.Errorf("stats %+v: want at most 2 sessions, no session-limit 429, 3 logins", s)
		}
	})
	t.Run("rejected fresh token", func(t *testing.T) {
		e := newEnv(t, plentysim.Config{})
		e.sim.RejectNewTokens(time.Hour, true)
		st := openState(t, filepath.Join(t.TempDir(), "state.db"))
		if _, err := e.process(t, st, nil).SearchOrders(context.Background(), order.Query{}); !errors.Is(err, plenty.ErrUnauthorized) {
			t.Fatalf("err = %v, want 401", err)
		}
		for range 20 { // restarts every few seconds
			e.clk.Advance(3 * time.Second)
			st = restart(t, st)
			_, _ = e.process(t, st, nil).SearchOrders(context.Background(), order.Query{})
		}
		if s := e.sim.Stats(); s.LoginCalls != 1 {
			t.Errorf("%d logins in a minute of restarts with a fresh token rejected, want 1", s.LoginCalls)
		}
	})
}

// Any sequence of lost login and renewal answers, rejected fresh tokens,
// sessions the service ends, and restarts keeps the client below the
// service's default limit of 3 (2 at most: one stays for the shop's other
// integrations) without a single session-limit 429.
func TestSessionsUnderRandomFaults(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 18))
			e := newEnv(t, plentysim.Config{TokenTTL: 2 * time.Hour})
			st := openState(t, filepath.Join(t.TempDir(), "state.db"))
			c := e.process(t, st, nil)
			kinds := []plentysim.LoginFault{plentysim.LoginCut, plentysim.LoginDrop, plentysim.LoginServerError}
			served := 0
			for range 300 {
				switch rng.IntN(12) {
				case 0:
					_ = e.sim.FailLogins(1+rng.IntN(2), kinds[rng.IntN(len(kinds))])
				case 1:
					e.sim.FailRefreshes(1)
				case 2:
					e.sim.RejectNewTokens(time.Duration(rng.IntN(3600))*time.Second, rng.IntN(2) == 0)
				case 3:
					st = restart(t, st)
					c = e.process(t, st, nil)
				case 4:
					e.sim.ExpireSessions()
				}
				if _, err := c.SearchOrders(context.Background(), order.Query{}); err == nil {
					served++
				}
				e.clk.Advance(time.Duration(1+rng.IntN(1200)) * time.Second)
			}
			s := e.sim.Stats()
			if s.SessionLimit429 != 0 || s.MaxConcurrentSessions > 2 {
				t.Errorf("stats %+v: want no session-limit 429, at most 2 sessions at once", s)
			}
			t.Logf("%d of 300 sweeps served, %d logins, %d refreshes, %d 401s, at most %d sessions", served, s.LoginCalls, s.RefreshCalls, s.Unauthorized401, s.MaxConcurrentSessions)
		})
	}
}
