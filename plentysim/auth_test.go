package plentysim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"
)

func TestLoginStyles(t *testing.T) {
	tests := []struct {
		style   LoginStyle
		fixture string
	}{
		{"", "login-snake.json"},
		{LoginSnake, "login-snake.json"},
		{LoginCamel, "login-camel.json"},
		{LoginBoth, "login-both.json"},
	}
	for _, tt := range tests {
		t.Run(string(tt.style), func(t *testing.T) {
			h := newHarness(t, Config{LoginStyle: tt.style})
			r := h.do(http.MethodPost, PathLogin, "", loginBody("demo", "demo"), "Accept", "application/json")
			if r.status != http.StatusOK {
				t.Fatalf("status %d %s", r.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var got, want map[string]any
			if err := json.Unmarshal(r.body, &got); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(fixture(t, tt.fixture), &want); err != nil {
				t.Fatal(err)
			}
			if g, w := slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)); !slices.Equal(g, w) {
				t.Fatalf("keys %v, fixture has %v", g, w)
			}
			for k, w := range want {
				switch k {
				case "access_token", "accessToken", "refresh_token", "refreshToken":
					if s, ok := got[k].(string); !ok || len(s) < 40 {
						t.Errorf("%s = %v, want a long opaque string", k, got[k])
					}
				default: // token type, expiry, session counts: same values as the fixture
					if got[k] != w {
						t.Errorf("%s = %v, want %v", k, got[k], w)
					}
				}
			}
			if tk := decodeTokens(t, r.body); tk.Access == h.login() {
				t.Error("two logins got the same access token")
			}
		})
	}
}

func TestLoginRequestForms(t *testing.T) {
	h := newHarness(t, Config{Username: "api", Password: "s3cret", MaxSessions: 10})
	tests := []struct {
		name        string
		contentType string
		body        string
		query       string
		want        int
	}{
		{"json", "application/json", `{"username":"api","password":"s3cret"}`, "", http.StatusOK},
		{"form", "application/x-www-form-urlencoded", url.Values{"username": {"api"}, "password": {"s3cret"}}.Encode(), "", http.StatusOK},
		{"query", "", "", "?username=api&password=s3cret", http.StatusOK},
		{"wrong password", "application/json", `{"username":"api","password":"nope"}`, "", http.StatusUnauthorized},
		{"wrong user", "application/json", `{"username":"demo","password":"s3cret"}`, "", http.StatusUnauthorized},
		{"no body", "", "", "", http.StatusUnauthorized},
		{"not json", "application/json", `{"username":`, "", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
			}
			r := h.do(http.MethodPost, PathLogin+tt.query, "", body, "Content-Type", tt.contentType)
			if r.status != tt.want {
				t.Fatalf("status %d %s, want %d", r.status, r.body, tt.want)
			}
			if tt.want == http.StatusUnauthorized {
				if got, want := string(r.body), string(fixture(t, "error-401-login.json")); got != want {
					t.Errorf("body %s, want %s", got, want)
				}
			}
		})
	}
	if st := h.sim.Stats(); st.LoginCalls != len(tests) || st.Unauthorized401 != 4 || st.ActiveSessions != 3 {
		t.Errorf("stats %+v", st)
	}
}

func TestSessionLimit(t *testing.T) {
	h := newHarness(t, Config{TokenTTL: time.Hour})
	var first []string
	for range 3 {
		first = append(first, h.login())
	}
	r := h.do(http.MethodPost, PathLogin, "", loginBody("demo", "demo"))
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("4th login: %d %s", r.status, r.body)
	}
	if got, want := string(r.body), string(fixture(t, "error-429-sessions.json")); got != want {
		t.Errorf("body %s, want %s", got, want)
	}
	// The earlier sessions are untouched by the refused login.
	for _, tok := range first {
		h.search(tok, "", nil)
	}
	st := h.sim.Stats()
	if st.SessionLimit429 != 1 || st.ActiveSessions != 3 || st.MaxConcurrentSessions != 3 {
		t.Errorf("stats %+v", st)
	}

	t.Run("expired sessions free their slots", func(t *testing.T) {
		h.clock.Advance(time.Hour)
		for range 3 {
			h.login()
		}
		if r := h.do(http.MethodGet, PathSearch, first[0], nil); r.status != http.StatusUnauthorized {
			t.Errorf("expired token: %d", r.status)
		}
	})
	t.Run("ExpireSessions", func(t *testing.T) {
		// All slots are taken now.
		if r := h.do(http.MethodPost, PathLogin, "", loginBody("demo", "demo")); r.status != http.StatusTooManyRequests {
			t.Fatalf("login with full slots: %d", r.status)
		}
		h.sim.ExpireSessions()
		if n := h.sim.Stats().ActiveSessions; n != 0 {
			t.Errorf("ActiveSessions after ExpireSessions = %d", n)
		}
		h.search(h.login(), "", nil)
	})
	t.Run("custom maximum", func(t *testing.T) {
		h := newHarness(t, Config{MaxSessions: 1})
		h.login()
		r := h.do(http.MethodPost, PathLogin, "", loginBody("demo", "demo"))
		want := `{"error":"too_many_concurrent_sessions","max_current_sessions":1,"message":"Too many users. Only 1 users can be logged in simultaneously. Please try again later."}`
		if r.status != http.StatusTooManyRequests || string(r.body) != want {
			t.Errorf("%d %s", r.status, r.body)
		}
	})
}

func TestRefresh(t *testing.T) {
	h := newHarness(t, Config{LoginStyle: LoginBoth, TokenTTL: time.Hour})
	r := h.do(http.MethodPost, PathLogin, "", loginBody("demo", "demo"))
	old := decodeTokens(t, r.body)
	h.clock.Advance(50 * time.Minute)

	tests := []struct {
		name string
		body func(refresh string) []byte
	}{
		{"snake", func(rt string) []byte { return []byte(`{"refresh_token":"` + rt + `"}`) }},
		{"camel", func(rt string) []byte { return []byte(`{"refreshToken":"` + rt + `"}`) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do(http.MethodPost, PathRefresh, "", tt.body(old.Refresh))
			if r.status != http.StatusOK {
				t.Fatalf("refresh: %d %s", r.status, r.body)
			}
			var both map[string]any
			_ = json.Unmarshal(r.body, &both)
			if both["concurrent_sessions"] != 1.0 || both["tokenType"] != "Bearer" || both["token_type"] != "Bearer" {
				t.Errorf("refresh response %s", r.body)
			}
			fresh := decodeTokens(t, r.body)
			if fresh.Access == old.Access || fresh.Refresh == old.Refresh || fresh.ExpiresIn != 3600 {
				t.Errorf("refresh gave %+v after %+v", fresh, old)
			}
			if r := h.do(http.MethodGet, PathSearch, old.Access, nil); r.status != http.StatusUnauthorized {
				t.Errorf("old access token after refresh: %d", r.status)
			}
			if r := h.do(http.MethodPost, PathRefresh, "", tt.body(old.Refresh)); r.status != http.StatusUnauthorized {
				t.Errorf("old refresh token reused: %d", r.status)
			}
			h.search(fresh.Access, "", nil)
			if n := h.sim.Stats().ActiveSessions; n != 1 {
				t.Errorf("ActiveSessions = %d, want 1", n)
			}
			old = fresh
		})
	}

	t.Run("the refreshed session lives a new TTL", func(t *testing.T) {
		h.clock.Advance(30 * time.Minute) // 80 minutes after the login
		h.search(old.Access, "", nil)
	})
	t.Run("expired or unknown refresh token", func(t *testing.T) {
		for _, body := range []string{`{"refresh_token":"def50200unknown"}`, `{}`, ``} {
			r := h.do(http.MethodPost, PathRefresh, "", []byte(body))
			if r.status != http.StatusUnauthorized || string(r.body) != string(fixture(t, "error-401-token.json")) {
				t.Errorf("%q: %d %s", body, r.status, r.body)
			}
		}
		h.clock.Advance(time.Hour)
		if r := h.do(http.MethodPost, PathRefresh, "", []byte(`{"refresh_token":"`+old.Refresh+`"}`)); r.status != http.StatusUnauthorized {
			t.Errorf("expired session refreshed: %d %s", r.status, r.body)
		}
	})
	t.Run("DisableRefresh", func(t *testing.T) {
		h := newHarness(t, Config{DisableRefresh: true})
		tk := decodeTokens(t, h.do(http.MethodPost, PathLogin, "", loginBody("demo", "demo")).body)
		if r := h.do(http.MethodPost, PathRefresh, "", []byte(`{"refresh_token":"`+tk.Refresh+`"}`)); r.status != http.StatusNotFound {
			t.Errorf("refresh: %d %s", r.status, r.body)
		}
	})
	if st := h.sim.Stats(); st.RefreshCalls != 8 {
		t.Errorf("RefreshCalls = %d, want 8", st.RefreshCalls)
	}
}

func TestUnauthorized(t *testing.T) {
	h := newHarness(t, Config{TokenTTL: time.Minute})
	tok := h.login()
	h.clock.Advance(time.Minute)
	tests := []struct {
		name, auth string
	}{
		{"missing", ""},
		{"not bearer", "Basic ZGVtbzpkZW1v"},
		{"unknown", "Bearer not-a-token"},
		{"expired", "Bearer " + tok},
	}
	want := string(fixture(t, "error-401-token.json"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				r := h.do(method, PathSearch+"?statusId=5", "", []byte(`{}`), "Authorization", tt.auth)
				if r.status != http.StatusUnauthorized || string(r.body) != want {
					t.Errorf("%s: %d %s", method, r.status, r.body)
				}
				if r.header.Get("X-Plenty-Global-Short-Period-Limit") == "" {
					t.Errorf("%s: no throttle headers on a 401", method)
				}
			}
		})
	}
	if st := h.sim.Stats(); st.Unauthorized401 != 2*len(tests) {
		t.Errorf("Unauthorized401 = %d", st.Unauthorized401)
	}
}

// FailLogins: the session opens, its answer is lost in the way asked for,
// and the count of lost answers runs out.
func TestFailLogins(t *testing.T) {
	for _, kind := range []LoginFault{LoginCut, LoginDrop, LoginHang, LoginServerError} {
		t.Run(string(kind), func(t *testing.T) {
			h := newHarness(t, Config{TokenTTL: 30 * time.Second})
			if err := h.sim.FailLogins(2, kind); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				resp, body, err := lostLogin(t, h, kind, i+1)
				switch kind {
				case LoginCut:
					if err != nil || resp.StatusCode != 200 || json.Valid(body) || !bytes.Contains(body, []byte(`"expires_in":30`)) {
						t.Errorf("login %d: %v %s: want a 200 whose body is cut after expires_in", i, err, body)
					}
				case LoginDrop:
					if !errors.Is(err, io.ErrUnexpectedEOF) || !bytes.Contains(body, []byte(`"expires_in":30`)) {
						t.Errorf("login %d: %v %q: want half a body, then the connection closed", i, err, body)
					}
				case LoginHang:
					if err == nil {
						t.Errorf("login %d answered %d; want no answer before the client's timeout", i, resp.StatusCode)
					}
				case LoginServerError:
					if err != nil || resp.StatusCode != 500 {
						t.Errorf("login %d: %v; want a 500", i, err)
					}
				}
			}
			h.login() // the third is answered
			if st := h.sim.Stats(); st.ActiveSessions != 3 || st.LoginCalls != 3 || st.FaultsInjected != 2 {
				t.Errorf("stats %+v: every login opened a session, two answers were lost", st)
			}
		})
	}
	if err := newHarness(t, Config{}).sim.FailLogins(1, "slow"); err == nil {
		t.Error("an unknown login fault must be refused")
	}
}

// lostLogin posts a login whose answer the simulator loses and reads the
// answer. The client gives up on a hanging one once the simulator has
// opened its session (its n-th fault), not after a fixed time: on a
// loaded machine the request may not reach the handler within a short
// client timeout, and an answer that does come may come late.
func lostLogin(t *testing.T, h *harness, kind LoginFault, n int) (*http.Response, []byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+PathLogin, bytes.NewReader(loginBody("demo", "demo")))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if kind == LoginHang {
		go func() {
			for h.sim.Stats().FaultsInjected < n && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
		}()
	}
	resp, err := http.DefaultClient.Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	return resp, body, err
}

// FailRefreshes: the session is renewed (new tokens, the old ones refused)
// but the answer is dropped; the session stays open.
func TestFailRefreshes(t *testing.T) {
	h := newHarness(t, Config{})
	r := h.do(http.MethodPost, PathLogin, "", loginBody("demo", "demo"))
	tk := decodeTokens(t, r.body)
	h.sim.FailRefreshes(1)
	resp, err := http.Post(h.srv.URL+PathRefresh, "application/json", bytes.NewReader([]byte(`{"refresh_token":"`+tk.Refresh+`"}`)))
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("refresh: %v, want half an answer, then the connection closed", err)
	}
	if got := h.do(http.MethodGet, PathSearch, tk.Access, nil); got.status != http.StatusUnauthorized {
		t.Errorf("the old token after the renewal: %d, want 401", got.status)
	}
	if st := h.sim.Stats(); st.ActiveSessions != 1 || st.RefreshCalls != 1 || st.FaultsInjected != 1 {
		t.Errorf("stats %+v: want the session still open, one renewal, one fault", st)
	}
}

// RejectNewTokens: tokens issued in the window answer 401 (until it ends,
// or for good) while their sessions count; tokens issued later work.
func TestRejectNewTokens(t *testing.T) {
	for _, forever := range []bool{false, true} {
		h := newHarness(t, Config{})
		h.sim.RejectNewTokens(time.Minute, forever)
		early := h.login()
		if got := h.do(http.MethodGet, PathSearch, early, nil); got.status != http.StatusUnauthorized {
			t.Errorf("forever=%v: a new token answered %d, want 401", forever, got.status)
		}
		h.clock.Advance(2 * time.Minute)
		if got, want := h.do(http.MethodGet, PathSearch, early, nil).status, map[bool]int{false: 200, true: 401}[forever]; got != want {
			t.Errorf("forever=%v: the early token after the window answered %d, want %d", forever, got, want)
		}
		if got := h.do(http.MethodGet, PathSearch, h.login(), nil); got.status != http.StatusOK {
			t.Errorf("forever=%v: a token issued after the window answered %d, want 200", forever, got.status)
		}
		if st := h.sim.Stats(); st.ActiveSessions != 2 {
			t.Errorf("forever=%v: %d sessions open, want 2 (the refused token's session counts)", forever, st.ActiveSessions)
		}
	}
}
