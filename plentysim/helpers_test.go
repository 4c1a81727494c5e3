package plentysim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// clock is an injectable server clock that tests advance by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// harness is a simulator behind a real HTTP server.
type harness struct {
	t     *testing.T
	sim   *Server
	srv   *httptest.Server
	clock *clock
}

// newHarness starts a simulator with cfg; cfg.Now defaults to a test clock.
func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	c := newClock()
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	sim := New(cfg)
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return &harness{t: t, sim: sim, srv: srv, clock: c}
}

// response is a fully read HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request; token, if not empty, goes into the Authorization header.
func (h *harness) do(method, pathAndQuery, token string, body []byte, header ...string) response {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.srv.URL+pathAndQuery, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, pathAndQuery, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatalf("%s %s: reading body: %v", method, pathAndQuery, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// loginBody is the JSON login request.
func loginBody(user, pass string) []byte {
	b, _ := json.Marshal(map[string]string{"username": user, "password": pass})
	return b
}

// tokens are the tokens of a login or refresh response of any style.
type tokens struct {
	Access, Refresh string
	ExpiresIn       int
}

func decodeTokens(t *testing.T, body []byte) tokens {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("token response %s: %v", body, err)
	}
	var tk tokens
	for _, k := range []string{"access_token", "accessToken"} {
		if v, ok := m[k].(string); ok {
			tk.Access = v
		}
	}
	for _, k := range []string{"refresh_token", "refreshToken"} {
		if v, ok := m[k].(string); ok {
			tk.Refresh = v
		}
	}
	for _, k := range []string{"expires_in", "expiresIn"} {
		if v, ok := m[k].(float64); ok {
			tk.ExpiresIn = int(v)
		}
	}
	if tk.Access == "" || tk.Refresh == "" {
		t.Fatalf("token response without tokens: %s", body)
	}
	return tk
}

// login logs in with the default credentials and returns the access token.
func (h *harness) login() string {
	h.t.Helper()
	r := h.do(http.MethodPost, PathLogin, "", loginBody("demo", "demo"))
	if r.status != http.StatusOK {
		h.t.Fatalf("login: %d %s", r.status, r.body)
	}
	return decodeTokens(h.t, r.body).Access
}

// envelope is the decoded search page.
type envelope struct {
	Page           json.RawMessage
	TotalsCount    int
	IsLastPage     bool
	LastPageNumber int
	FirstOnPage    int
	LastOnPage     int
	ItemsPerPage   int
	Entries        []map[string]json.RawMessage
}

func (e envelope) ids(t *testing.T) []int64 {
	t.Helper()
	ids := make([]int64, 0, len(e.Entries))
	for _, en := range e.Entries {
		var id int64
		if err := json.Unmarshal(en["id"], &id); err != nil {
			t.Fatalf("entry id %s: %v", en["id"], err)
		}
		ids = append(ids, id)
	}
	return ids
}

// search runs GET (body nil) or POST search and decodes a 200 page.
func (h *harness) search(token, query string, body []byte) envelope {
	h.t.Helper()
	method := http.MethodGet
	if body != nil {
		method = http.MethodPost
	}
	r := h.do(method, PathSearch+"?"+query, token, body)
	if r.status != http.StatusOK {
		h.t.Fatalf("search %q %s: %d %s", query, body, r.status, r.body)
	}
	var env envelope
	if err := json.Unmarshal(r.body, &env); err != nil {
		h.t.Fatalf("search %q: %v in %s", query, err, r.body)
	}
	return env
}

// fixture reads a copy of a shared fixture (testdata/fixtures).
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSpace(b)
}

// compact returns the compact form of a JSON document (key order and
// number text kept).
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %s: %v", b, err)
	}
	return buf.String()
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
