package plentysim

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// TenantPrefix is the first path segment of a tenant's base path:
// /shops/<id>/rest/login, /shops/<id>/rest/orders/search.
const TenantPrefix = "/shops/"

// tenantID: the characters of a tenant id (a path segment, a NATS token).
var tenantID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// Call is one request a tenant answered (Tenants.SetOnCall).
type Call struct {
	Tenant     string
	Agent      string // the User-Agent: orderwatch names its replica there
	Path       string // inside the tenant: /rest/orders/search
	Status     int
	Start, End time.Time
}

// Tenants serves many simulated systems in one process, one per base path
// /shops/<id>: each tenant is a Server of its own, with its own orders,
// throttle quota, sessions and faults, so that a fleet of watchers can be
// tested offline. It implements http.Handler; a request for an unknown
// tenant is a 404 with the service's JSON error body. All methods are
// safe for concurrent use.
type Tenants struct {
	mu      sync.RWMutex
	servers map[string]*Server
	calls   map[string]map[string]int // tenant -> User-Agent -> requests
	onCall  func(Call)
}

// NewTenants returns a multi-tenant simulator without tenants.
func NewTenants() *Tenants {
	return &Tenants{servers: make(map[string]*Server), calls: make(map[string]map[string]int)}
}

// NewMulti returns n tenants named by TenantName(i, n), each a New(cfg)
// with its own seed (cfg.Seed + i: different orders and faults).
func NewMulti(n int, cfg Config) *Tenants {
	t := NewTenants()
	base := cfg.Seed
	if base == 0 {
		base = 1
	}
	for i := range n {
		c := cfg
		c.Seed = base + int64(i)
		if _, err := t.Add(TenantName(i, n), c); err != nil {
			panic("plentysim: " + err.Error())
		}
	}
	return t
}

// TenantName is the id NewMulti gives the i-th (from 0) of n tenants:
// shop-001 ... with at least three digits, zero-padded to sort by number.
func TenantName(i, n int) string {
	width := max(3, len(fmt.Sprint(n)))
	return fmt.Sprintf("shop-%0*d", width, i+1)
}

// TenantPath is the base path of a tenant: /shops/<id>.
func TenantPath(id string) string { return strings.TrimSuffix(TenantPrefix, "/") + "/" + id }

// Add creates the tenant id with cfg (panics like New when cfg does not
// validate: use Config.Validate first). An existing id is an error.
func (t *Tenants) Add(id string, cfg Config) (*Server, error) {
	if !tenantID.MatchString(id) {
		return nil, fmt.Errorf("tenant id %q: want letters, digits, '-' and '_' (at most 64)", id)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("tenant %s: %w", id, err)
	}
	s := New(cfg)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.servers[id]; ok {
		return nil, fmt.Errorf("tenant %s exists", id)
	}
	t.servers[id] = s
	return s, nil
}

// Remove deletes a tenant: its base path answers 404 from now on.
func (t *Tenants) Remove(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.servers[id]
	delete(t.servers, id)
	delete(t.calls, id)
	return ok
}

// Tenant returns the simulator of a tenant (nil when unknown).
func (t *Tenants) Tenant(id string) *Server {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.servers[id]
}

// IDs lists the tenants, sorted.
func (t *Tenants) IDs() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	ids := make([]string, 0, len(t.servers))
	for id := range t.servers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// CallsBy counts the requests a tenant answered per User-Agent (orderwatch
// names its replica in it): who called the tenant, and how often.
func (t *Tenants) CallsBy(id string) map[string]int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]int, len(t.calls[id]))
	for a, n := range t.calls[id] {
		out[a] = n
	}
	return out
}

// SetOnCall installs fn, called after every request a tenant answered
// (from the request's goroutine; it must be safe for concurrent use).
// nil removes it.
func (t *Tenants) SetOnCall(fn func(Call)) {
	t.mu.Lock()
	t.onCall = fn
	t.mu.Unlock()
}

// ServeHTTP routes /shops/<id>/... to the tenant's simulator with the
// prefix stripped.
func (t *Tenants) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, TenantPrefix)
	id, path, _ := strings.Cut(rest, "/")
	t.mu.RLock()
	s := t.servers[id]
	t.mu.RUnlock()
	if !ok || s == nil {
		writeJSON(w, http.StatusNotFound, errorBody("Not Found: no such system", http.StatusNotFound))
		return
	}
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path, u.RawPath = "/"+path, ""
	r2.URL = &u
	start := time.Now()
	rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	s.ServeHTTP(rec, r2)
	agent := r.UserAgent()
	t.mu.Lock()
	if t.servers[id] == s {
		if t.calls[id] == nil {
			t.calls[id] = make(map[string]int)
		}
		t.calls[id][agent]++
	}
	fn := t.onCall
	t.mu.Unlock()
	if fn != nil {
		fn(Call{Tenant: id, Agent: agent, Path: u.Path, Status: rec.status, Start: start, End: time.Now()})
	}
}

// statusWriter remembers the status; Unwrap keeps hijacking (the
// dropped-connection fault) available through http.ResponseController.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
