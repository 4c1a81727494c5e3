package plenty_test

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/state"
)

// TestSealedSessionOpensOnlyForItsShopAndPassword: the sealed copy of the
// session opens with the password and identity it was sealed for, and with
// nothing else; a changed byte fails cleanly; the token is not in clear.
func TestSealedSessionOpensOnlyForItsShopAndPassword(t *testing.T) {
	const url, user, pw = "https://shop.example", "api", "secret"
	tok := order.Token{AccessToken: "eyJ.access", RefreshToken: "def.refresh", TokenType: "Bearer",
		ExpiresAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}
	rec, err := plenty.SealForTest(pw, url, user, tok)
	if err != nil {
		t.Fatal(err)
	}
	for _, clear := range []string{tok.AccessToken, tok.RefreshToken, "access", "refresh", pw} {
		if bytes.Contains(rec, []byte(clear)) {
			t.Errorf("the sealed record holds %q in clear: %s", clear, rec)
		}
	}
	got, err := plenty.OpenForTest(pw, url, user, rec)
	if err != nil || got != tok {
		t.Fatalf("open = %+v, %v; want %+v", got, err, tok)
	}
	again, _ := plenty.SealForTest(pw, url, user, tok)
	if bytes.Equal(again, rec) {
		t.Error("two seals of one token are equal: the nonce is not random")
	}
	for name, open := range map[string]func() (order.Token, error){
		"a rotated password": func() (order.Token, error) { return plenty.OpenForTest("rotated", url, user, rec) },
		"another shop's URL": func() (order.Token, error) { return plenty.OpenForTest(pw, "https://other.example", user, rec) },
		"another username":   func() (order.Token, error) { return plenty.OpenForTest(pw, url, "api2", rec) },
	} {
		if got, err := open(); err == nil || got != (order.Token{}) {
			t.Errorf("%s opened the session: %+v", name, got)
		}
	}
	var r map[string]any
	if err := json.Unmarshal(rec, &r); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{"box", "nonce"} {
		b := tamper(t, rec, field)
		if got, err := plenty.OpenForTest(pw, url, user, b); err == nil || got != (order.Token{}) {
			t.Errorf("a record with a changed %s opened: %+v", field, got)
		}
	}
}

// tamper flips one bit of the base64 field of a sealed record.
func tamper(t *testing.T, rec []byte, field string) []byte {
	t.Helper()
	var r map[string]json.RawMessage
	if err := json.Unmarshal(rec, &r); err != nil {
		t.Fatal(err)
	}
	var b []byte
	if err := json.Unmarshal(r[field], &b); err != nil || len(b) == 0 {
		t.Fatalf("field %s of %s: %v", field, rec, err)
	}
	b[len(b)/2] ^= 1
	r[field], _ = json.Marshal(b)
	out, _ := json.Marshal(r)
	return out
}

// moveShop is a takeover by another process on a new state file (a fleet
// member with an empty state directory, a replica): the records of the
// shop's state file travel as the group's checkpoint carries them; the
// token itself does not.
func moveShop(t *testing.T, from *state.Store) *state.Store {
	t.Helper()
	ckpt, _, err := from.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	to := openState(t, filepath.Join(t.TempDir(), "state.db"))
	if err := to.RestoreCheckpoint(ckpt, nil); err != nil {
		t.Fatal(err)
	}
	return to
}

// TestSessionMovesWithTheShop: a shop taken over six times within a
// token's life, once after its session was renewed, makes one login in
// all with the service's default of 3 sessions, and every process's calls
// go on (before: a login per takeover, and the fourth was refused with
// too_many_concurrent_sessions).
func TestSessionMovesWithTheShop(t *testing.T) {
	e := newEnv(t, plentysim.Config{})
	e.sim.Generate(10, e.clk.Now().Add(-time.Hour), e.clk.Now())
	st := openState(t, filepath.Join(t.TempDir(), "state.db"))
	search(t, e.process(t, st, nil), order.Query{})
	for i := range 6 {
		if i == 3 {
			e.clk.Advance(23*time.Hour + 25*time.Minute) // 5 min before the expiry, inside RenewBefore: this process renews
		} else {
			e.clk.Advance(10 * time.Minute)
		}
		st = moveShop(t, st)
		search(t, e.process(t, st, nil), order.Query{})
	}
	s := e.sim.Stats()
	if s.LoginCalls != 1 || s.SessionLimit429 != 0 || s.MaxConcurrentSessions != 1 || s.Unauthorized401 != 0 || s.RefreshCalls != 1 {
		t.Errorf("after 6 takeovers: %d logins, %d session-limit 429s, at most %d sessions, %d 401s, %d renewals; want 1, 0, 1, 0, 1",
			s.LoginCalls, s.SessionLimit429, s.MaxConcurrentSessions, s.Unauthorized401, s.RefreshCalls)
	}
	tok, err := st.LoadToken(context.Background())
	if err != nil || !tok.Valid(e.clk.Now(), 0) {
		t.Fatalf("the last process's own token: %+v, %v", tok, err)
	}
	recs, err := st.Records()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := recs[plenty.SealedSessionRecord]; !ok {
		t.Errorf("no record %q among %d", plenty.SealedSessionRecord, len(recs))
	}
	// The session taken over is the one in use, not one more: no
	// process's login guard counts a session without a token.
	var guard struct {
		Unsure []time.Time `json:"unsure_ends"`
		Others map[string]struct {
			Ends []time.Time `json:"ends"`
		} `json:"others"`
	}
	if err := json.Unmarshal(recs[plenty.SessionsRecord], &guard); err != nil {
		t.Fatal(err)
	}
	n := len(guard.Unsure)
	for _, o := range guard.Others {
		n += len(o.Ends)
	}
	if n != 0 {
		t.Errorf("the login guard counts %d sessions without a token after the takeovers: %s", n, recs[plenty.SessionsRecord])
	}
	for name, raw := range recs {
		if bytes.Contains(raw, []byte(tok.AccessToken)) || bytes.Contains(raw, []byte(tok.RefreshToken)) {
			t.Errorf("record %q, which goes to the group's checkpoint, holds the token in clear", name)
		}
	}
}

// TestSealedSessionThatDoesNotOpenLogsIn: a record sealed under an earlier
// password (rotated), or damaged, is not used: one login, and the calls go
// on.
func TestSealedSessionThatDoesNotOpenLogsIn(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, e *env, raw []byte) []byte
	}{
		{"damaged", func(t *testing.T, _ *env, raw []byte) []byte { return tamper(t, raw, "box") }},
		{"sealed under the earlier password", func(t *testing.T, e *env, raw []byte) []byte {
			rec, err := plenty.SealForTest("earlier", e.srv.URL, "demo",
				order.Token{AccessToken: "x", ExpiresAt: e.clk.Now().Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			return rec
		}},
		{"not a sealed session", func(*testing.T, *env, []byte) []byte { return []byte(`{"v":1,"nonce":"AAAA","box":"AAAA"}`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, plentysim.Config{})
			st := openState(t, filepath.Join(t.TempDir(), "state.db"))
			search(t, e.process(t, st, nil), order.Query{})
			st = moveShop(t, st)
			recs, _ := st.Records()
			if err := st.SaveRecord(plenty.SealedSessionRecord, json.RawMessage(tc.edit(t, e, recs[plenty.SealedSessionRecord]))); err != nil {
				t.Fatal(err)
			}
			search(t, e.process(t, st, nil), order.Query{})
			if s := e.sim.Stats(); s.LoginCalls != 2 || s.Unauthorized401 != 0 {
				t.Errorf("%d logins, %d 401s; want 2 (one per process), 0", s.LoginCalls, s.Unauthorized401)
			}
		})
	}
}

// TestTakenOverSessionRejectedLogsInOnce: a 401 to the session taken over
// (the service ended it) is a 401 to a token that has served calls: it is
// dropped and the client logs in once, at once; its sealed copy is
// replaced, so the next takeover goes on with the new session.
func TestTakenOverSessionRejectedLogsInOnce(t *testing.T) {
	e := newEnv(t, plentysim.Config{})
	st := openState(t, filepath.Join(t.TempDir(), "state.db"))
	search(t, e.process(t, st, nil), order.Query{})
	st = moveShop(t, st)
	e.sim.ExpireSessions()
	search(t, e.process(t, st, nil), order.Query{})
	if s := e.sim.Stats(); s.LoginCalls != 2 || s.Unauthorized401 != 1 {
		t.Errorf("%d logins, %d 401s; want 2, 1", s.LoginCalls, s.Unauthorized401)
	}
	st = moveShop(t, st)
	search(t, e.process(t, st, nil), order.Query{})
	if s := e.sim.Stats(); s.LoginCalls != 2 || s.Unauthorized401 != 1 {
		t.Errorf("after one more takeover: %d logins, %d 401s; want still 2, 1", s.LoginCalls, s.Unauthorized401)
	}
}

// TestLiveTokenIsSealedAtStart: a process that starts with a live token
// of its own that the sealed record does not hold (a state file of an
// earlier version, with no record; a record sealed with the password
// before a rotation) seals its token at its first call, so the next
// takeover goes on with that session instead of logging in.
func TestLiveTokenIsSealedAtStart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		edit     func(t *testing.T, st *state.Store)
		password string // of the restarted process and its successor
	}{
		{"no record (an earlier version)", func(t *testing.T, st *state.Store) {
			if err := st.SaveRecord(plenty.SealedSessionRecord, nil); err != nil {
				t.Fatal(err)
			}
		}, "demo"},
		{"a record of the earlier password", func(*testing.T, *state.Store) {}, "rotated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, plentysim.Config{})
			st := openState(t, filepath.Join(t.TempDir(), "state.db"))
			search(t, e.process(t, st, nil), order.Query{})
			tc.edit(t, st)
			st = restart(t, st)
			pw := func(c *plenty.Config) { c.Password = tc.password }
			search(t, e.process(t, st, pw), order.Query{})
			search(t, e.process(t, moveShop(t, st), pw), order.Query{})
			if s := e.sim.Stats(); s.LoginCalls != 1 || s.Unauthorized401 != 0 {
				t.Errorf("%d logins, %d 401s; want 1, 0", s.LoginCalls, s.Unauthorized401)
			}
		})
	}
}
