package plentysim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// tenantClient calls one tenant of a multi-tenant simulator.
type tenantClient struct {
	t     *testing.T
	base  string // http://host/shops/<id>
	agent string
}

func (c tenantClient) do(method, path, token string, body string) (int, []byte) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("User-Agent", c.agent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, c.base+path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (c tenantClient) login() string {
	c.t.Helper()
	code, body := c.do(http.MethodPost, PathLogin, "", string(loginBody("demo", "demo")))
	if code != http.StatusOK {
		c.t.Fatalf("login at %s: %d %s", c.base, code, body)
	}
	return decodeTokens(c.t, body).Access
}

func (c tenantClient) totals(token string) int {
	c.t.Helper()
	code, body := c.do(http.MethodGet, PathSearch, token, "")
	if code != http.StatusOK {
		c.t.Fatalf("search at %s: %d %s", c.base, code, body)
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		c.t.Fatal(err)
	}
	return env.TotalsCount
}

// TestTenantsAreIsolated: every tenant of one process has its own orders,
// sessions, throttle quota and faults; one tenant's exhausted quota and
// injected faults leave the others answering.
func TestTenantsAreIsolated(t *testing.T) {
	ts := NewMulti(3, Config{Limits: Limits{ShortLimit: 4}})
	srv := httptest.NewServer(ts)
	defer srv.Close()
	if got := strings.Join(ts.IDs(), ","); got != "shop-001,shop-002,shop-003" {
		t.Fatalf("tenants %s", got)
	}
	now := time.Now()
	ts.Tenant("shop-001").Generate(7, now.Add(-time.Hour), now)
	ts.Tenant("shop-002").Generate(2, now.Add(-time.Hour), now)
	a := tenantClient{t, srv.URL + TenantPath("shop-001"), "member-a"}
	b := tenantClient{t, srv.URL + TenantPath("shop-002"), "member-b"}
	c := tenantClient{t, srv.URL + TenantPath("shop-003"), "member-b"}

	ta, tb := a.login(), b.login()
	if n := a.totals(ta); n != 7 {
		t.Errorf("shop-001 serves %d orders, want its own 7", n)
	}
	if n := b.totals(tb); n != 2 {
		t.Errorf("shop-002 serves %d orders, want its own 2", n)
	}
	if code, _ := b.do(http.MethodGet, PathSearch, ta, ""); code != http.StatusUnauthorized {
		t.Errorf("shop-001's token at shop-002: %d, want 401 (sessions are per tenant)", code)
	}

	// shop-001 spends its short period (4 calls: login, search, and two more).
	for range 2 {
		a.do(http.MethodGet, PathSearch, ta, "")
	}
	if code, _ := a.do(http.MethodGet, PathSearch, ta, ""); code != http.StatusTooManyRequests {
		t.Fatalf("shop-001 past its quota: %d, want 429", code)
	}
	ts.Tenant("shop-001").SetFaults(Faults{ServerErrorRate: 1})
	if n := c.totals(c.login()); n != 0 {
		t.Errorf("shop-003 serves %d orders, want 0", n)
	}
	if st := ts.Tenant("shop-002").Stats(); st.Throttled429 != 0 || st.FaultsInjected != 0 {
		t.Errorf("shop-002 throttled or faulted by its neighbour: %+v", st)
	}

	if got := ts.CallsBy("shop-001"); got["member-a"] != 5 || len(got) != 1 {
		t.Errorf("calls of shop-001 by agent %v, want member-a: 5", got)
	}
	if got := ts.CallsBy("shop-003"); got["member-b"] != 2 || len(got) != 1 {
		t.Errorf("calls of shop-003 by agent %v, want member-b: 2", got)
	}
}

// TestTenantsUnknownAndRemoved: a path outside any tenant is the service's
// JSON 404; a removed tenant answers 404 from then on; ids are checked.
func TestTenantsUnknownAndRemoved(t *testing.T) {
	ts := NewTenants()
	if _, err := ts.Add("a", Config{}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "a/b", "-x", "with space", strings.Repeat("x", 65)} {
		if _, err := ts.Add(bad, Config{}); err == nil {
			t.Errorf("tenant id %q accepted", bad)
		}
	}
	if _, err := ts.Add("a", Config{}); err == nil {
		t.Error("a second tenant a accepted")
	}
	if _, err := ts.Add("b", Config{LoginStyle: "kebab"}); err == nil {
		t.Error("an invalid tenant configuration accepted")
	}
	srv := httptest.NewServer(ts)
	defer srv.Close()
	a := tenantClient{t, srv.URL + TenantPath("a"), "x"}
	a.login()
	for _, path := range []string{"/rest/login", "/shops/zz/rest/login", "/shops/"} {
		code, body := tenantClient{t, srv.URL, "x"}.do(http.MethodPost, path, "", "{}")
		if code != http.StatusNotFound || !json.Valid(body) {
			t.Errorf("POST %s: %d %s, want a JSON 404", path, code, body)
		}
	}
	if !ts.Remove("a") || ts.Remove("a") {
		t.Fatal("Remove: want true once, then false")
	}
	if code, _ := a.do(http.MethodPost, PathLogin, "", string(loginBody("demo", "demo"))); code != http.StatusNotFound {
		t.Errorf("removed tenant answers %d, want 404", code)
	}
}

// TestTenantDropFaultStillHijacks: the dropped-connection fault of a
// tenant (it hijacks the connection) works behind the tenant router.
func TestTenantDropFaultStillHijacks(t *testing.T) {
	ts := NewMulti(1, Config{Faults: Faults{DropRate: 1}})
	now := time.Now()
	ts.Tenant("shop-001").Generate(20, now.Add(-time.Hour), now)
	srv := httptest.NewServer(ts)
	defer srv.Close()
	c := tenantClient{t, srv.URL + TenantPath("shop-001"), "x"}
	tok := c.login()
	req, _ := http.NewRequest(http.MethodGet, c.base+PathSearch, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if err == nil {
		t.Fatal("a search with DropRate 1 was answered whole")
	}
	if st := ts.Tenant("shop-001").Stats(); st.FaultsInjected != 1 {
		t.Errorf("faults injected %d, want 1", st.FaultsInjected)
	}
}

// TestTenantsOnCallSeesEveryRequest: the call hook reports each request
// with its tenant, agent and path inside the tenant.
func TestTenantsOnCallSeesEveryRequest(t *testing.T) {
	ts := NewMulti(2, Config{})
	var mu sync.Mutex
	var got []string
	ts.SetOnCall(func(c Call) {
		mu.Lock()
		got = append(got, c.Tenant+" "+c.Agent+" "+c.Path)
		mu.Unlock()
		if c.End.Before(c.Start) {
			t.Errorf("call ends before it starts: %+v", c)
		}
	})
	srv := httptest.NewServer(ts)
	defer srv.Close()
	tenantClient{t, srv.URL + TenantPath("shop-002"), "m1"}.login()
	tenantClient{t, srv.URL + TenantPath("shop-001"), "m2"}.do(http.MethodGet, PathSearch, "", "")
	mu.Lock()
	defer mu.Unlock()
	if s := strings.Join(got, "; "); s != "shop-002 m1 /rest/login; shop-001 m2 /rest/orders/search" {
		t.Errorf("calls seen: %s", s)
	}
}

func TestTenantName(t *testing.T) {
	for _, tt := range []struct {
		i, n int
		want string
	}{{0, 3, "shop-001"}, {9, 10, "shop-010"}, {41, 1000, "shop-0042"}} {
		if got := TenantName(tt.i, tt.n); got != tt.want {
			t.Errorf("TenantName(%d, %d) = %s, want %s", tt.i, tt.n, got, tt.want)
		}
	}
}
