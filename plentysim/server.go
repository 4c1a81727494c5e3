package plentysim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
	_ "time/tzdata" // Europe/Berlin on machines without zoneinfo
	"unicode/utf8"
)

// LoginStyle selects the keys of the token response.
type LoginStyle string

// Token response styles seen on real systems.
const (
	LoginSnake LoginStyle = "snake" // token_type, expires_in, access_token, refresh_token (default)
	LoginCamel LoginStyle = "camel" // tokenType, expiresIn, accessToken, refreshToken
	LoginBoth  LoginStyle = "both"  // both key sets, plus concurrent_sessions and max_current_sessions
)

// StatusStyle selects how statusId and referrerId are rendered.
type StatusStyle string

// Status styles seen on real systems.
const (
	StatusNumber StatusStyle = "number" // JSON numbers with their decimal text: 5.1 (default)
	StatusString StatusStyle = "string" // decimal strings: "5.7"
	StatusMixed  StatusStyle = "mixed"  // per order: odd ids as numbers, even ids as strings; locationId of ids divisible by 3 as a number
)

// DefaultShortLimit is the short period's limit of a zero Limits.
const DefaultShortLimit = 200

// Limits are the throttling limits. Zero fields take the defaults.
type Limits struct {
	ShortLimit  int           // calls per short period per user; default DefaultShortLimit
	ShortPeriod time.Duration // default 20s
	LongLimit   int           // calls per long period per system; default 166000
	LongPeriod  time.Duration // default 24h
	RouteLimit  int           // per-user limit of the search route; 0 = no route limit headers
	RoutePeriod time.Duration // default 60s
	SearchCost  int           // calls a search counts for (the real service counts some calls twice); default 1
}

func (l Limits) withDefaults() Limits {
	if l.ShortLimit <= 0 {
		l.ShortLimit = DefaultShortLimit
	}
	if l.ShortPeriod <= 0 {
		l.ShortPeriod = 20 * time.Second
	}
	if l.LongLimit <= 0 {
		l.LongLimit = 166000
	}
	if l.LongPeriod <= 0 {
		l.LongPeriod = 24 * time.Hour
	}
	if l.RouteLimit < 0 {
		l.RouteLimit = 0
	}
	if l.RoutePeriod <= 0 {
		l.RoutePeriod = 60 * time.Second
	}
	if l.SearchCost <= 0 {
		l.SearchCost = 1
	}
	return l
}

// Faults are injected into order search requests. Each rate is a
// probability 0..1, drawn independently per request from the seeded RNG;
// when several hit, the first in field order wins.
type Faults struct {
	ServerErrorRate float64       // 500 with a JSON error body {"error":{"message":"Internal Server Error","code":500}}
	HTMLRate        float64       // 502 with an HTML page (Content-Type text/html)
	TruncateRate    float64       // 200 with a valid page body cut in the middle (Content-Length matching the cut body)
	GarbageRate     float64       // 200 with Content-Type application/json but invalid JSON (a PHP notice before the page)
	DropRate        float64       // connection hijacked and closed after sending headers and part of the body
	Latency         time.Duration // added to every search request (honours request context cancellation)
	SlowRate        float64       // probability of an extra SlowDelay on a search request
	SlowDelay       time.Duration
	DateSkew        time.Duration // added to the Date header of every response (a wrong clock); order timestamps keep the true time
	// ChangeWhilePaging is the probability that, before a page after the
	// first of an offset scan is served, one order of the queried result
	// set changes (its updatedAt moves to now, nothing else): the set the
	// client pages through shifts between two of its reads.
	ChangeWhilePaging float64
}

func (f Faults) validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{
		{"ServerErrorRate", f.ServerErrorRate}, {"HTMLRate", f.HTMLRate}, {"TruncateRate", f.TruncateRate},
		{"GarbageRate", f.GarbageRate}, {"DropRate", f.DropRate}, {"SlowRate", f.SlowRate},
		{"ChangeWhilePaging", f.ChangeWhilePaging},
	} {
		if !(r.v >= 0 && r.v <= 1) {
			return fmt.Errorf("faults: %s %v is not a probability in [0,1]", r.name, r.v)
		}
	}
	if f.Latency < 0 || f.SlowDelay < 0 {
		return errors.New("faults: negative delay")
	}
	return nil
}

// Config configures a Server. The zero Config is a valid default system.
type Config struct {
	Username, Password  string         // default "demo" / "demo"
	TokenTTL            time.Duration  // default 24h; expires_in is reported in whole seconds
	MaxSessions         int            // concurrent live sessions allowed; default 3
	LoginStyle          LoginStyle     // default LoginSnake
	DisableRefresh      bool           // POST /rest/login/refresh answers 404 when true
	StatusStyle         StatusStyle    // default StatusNumber
	PageAsString        bool           // envelope "page" as a string ("2"), as some systems do
	DefaultItemsPerPage int            // default 50
	MaxItemsPerPage     int            // silent cap; default 250
	Location            *time.Location // offset used to render timestamps; default Europe/Berlin
	Limits              Limits
	Faults              Faults
	Seed                int64            // RNG seed for faults, generator and mutator; 0 = 1
	Now                 func() time.Time // server clock; default time.Now
}

// Validate reports a configuration New would reject: an unknown style,
// a fault rate outside [0,1], negative sizes or durations.
func (c Config) Validate() error {
	switch c.LoginStyle {
	case "", LoginSnake, LoginCamel, LoginBoth:
	default:
		return fmt.Errorf("login style %q: want snake, camel or both", c.LoginStyle)
	}
	switch c.StatusStyle {
	case "", StatusNumber, StatusString, StatusMixed:
	default:
		return fmt.Errorf("status style %q: want number, string or mixed", c.StatusStyle)
	}
	if c.TokenTTL < 0 || c.MaxSessions < 0 || c.DefaultItemsPerPage < 0 || c.MaxItemsPerPage < 0 {
		return errors.New("negative TokenTTL, MaxSessions or items per page")
	}
	return c.Faults.validate()
}

func (c Config) withDefaults() Config {
	if c.Username == "" {
		c.Username = "demo"
	}
	if c.Password == "" {
		c.Password = "demo"
	}
	if c.TokenTTL <= 0 {
		c.TokenTTL = 24 * time.Hour
	}
	if c.MaxSessions <= 0 {
		c.MaxSessions = 3
	}
	if c.LoginStyle == "" {
		c.LoginStyle = LoginSnake
	}
	if c.StatusStyle == "" {
		c.StatusStyle = StatusNumber
	}
	if c.MaxItemsPerPage <= 0 {
		c.MaxItemsPerPage = 250
	}
	if c.DefaultItemsPerPage <= 0 {
		c.DefaultItemsPerPage = 50
	}
	c.DefaultItemsPerPage = min(c.DefaultItemsPerPage, c.MaxItemsPerPage)
	if c.Location == nil {
		loc, err := time.LoadLocation("Europe/Berlin")
		if err != nil {
			panic("plentysim: Europe/Berlin: " + err.Error()) // time/tzdata is linked in
		}
		c.Location = loc
	}
	c.Limits = c.Limits.withDefaults()
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Server simulates the commerce REST service over HTTP. It implements
// http.Handler; all methods are safe for concurrent use.
type Server struct {
	cfg Config // defaults applied; Limits and Faults are the initial values of the fields below

	mu      sync.RWMutex // guards the order store
	orders  []Order      // sorted by ID
	version uint64       // incremented by every change of orders
	results resultCache  // matches per filter at a version
	index   map[int64]int
	nextID  int64
	history []Change
	corrupt map[int64]Corruption // entries rendered unreadable (corrupt.go)
	genRNG  *rand.Rand
	mutRNG  *rand.Rand

	ctl          sync.Mutex // guards everything below
	limits       Limits
	faults       Faults
	faultRNG     *rand.Rand
	sessions     map[string]*session // by access token
	refreshes    map[string]*session // by refresh token
	live         map[*session]struct{}
	throttle     throttleState
	stats        Stats
	beforeSearch func(*http.Request, int)
	lostLogins   lostLogins // see FailLogins

	lostRefreshes int       // see FailRefreshes (ctl)
	rejectNew     rejectNew // see RejectNewTokens (ctl)
}

// New returns a Server without orders. It panics when cfg.Validate fails.
func New(cfg Config) *Server {
	if err := cfg.Validate(); err != nil {
		panic("plentysim: " + err.Error())
	}
	cfg = cfg.withDefaults()
	seed := uint64(cfg.Seed)
	return &Server{
		cfg:       cfg,
		index:     make(map[int64]int),
		nextID:    firstOrderID,
		genRNG:    rand.New(rand.NewPCG(seed, 1)),
		mutRNG:    rand.New(rand.NewPCG(seed, 2)),
		limits:    cfg.Limits,
		faults:    cfg.Faults,
		faultRNG:  rand.New(rand.NewPCG(seed, 3)),
		sessions:  make(map[string]*session),
		refreshes: make(map[string]*session),
		live:      make(map[*session]struct{}),
		throttle:  newThrottleState(),
	}
}

// Paths served by the simulator.
const (
	PathLogin   = "/rest/login"
	PathRefresh = "/rest/login/refresh"
	PathSearch  = "/rest/orders/search"
)

// ServeHTTP answers POST /rest/login, POST /rest/login/refresh and
// GET/POST /rest/orders/search; everything else is a 404 with a JSON error
// body. Every response carries a Date header from the configured clock and
// the throttle headers.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := s.cfg.Now()
	s.ctl.Lock()
	skew := s.faults.DateSkew
	s.ctl.Unlock()
	w.Header().Set("Date", now.Add(skew).UTC().Format(http.TimeFormat))
	switch {
	case r.URL.Path == PathLogin && r.Method == http.MethodPost:
		s.serveLogin(w, r, now)
	case r.URL.Path == PathRefresh && r.Method == http.MethodPost && !s.cfg.DisableRefresh:
		s.serveRefresh(w, r, now)
	case r.URL.Path == PathSearch && (r.Method == http.MethodGet || r.Method == http.MethodPost):
		s.serveSearch(w, r, now)
	default:
		s.serveNotFound(w, r, now)
	}
}

func (s *Server) serveNotFound(w http.ResponseWriter, r *http.Request, now time.Time) {
	s.ctl.Lock()
	key := s.callerLocked(r, now)
	rej := s.admitLocked(w.Header(), r, key, 1, false, now)
	s.ctl.Unlock()
	if rej != nil {
		writeJSON(w, http.StatusTooManyRequests, rej.body)
		return
	}
	writeJSON(w, http.StatusNotFound, errorBody("Not Found", http.StatusNotFound))
}

// callerLocked returns the throttle key of a request: the user of a valid
// bearer token, else the client address.
func (s *Server) callerLocked(r *http.Request, now time.Time) string {
	if sess := s.sessionLocked(bearerToken(r), now); sess != nil {
		return sess.user
	}
	return addrKey(r)
}

func addrKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "addr:" + host
}

// Stats are the simulator's counters.
type Stats struct {
	Calls, SearchCalls, LoginCalls, RefreshCalls int
	Throttled429                                 int // 429 for rate limits
	SessionLimit429                              int // 429 too_many_concurrent_sessions
	Unauthorized401                              int
	CallsWhileBlocked                            int // requests from a user that arrived before the Retry-After the simulator had given that user had passed
	ActiveSessions, MaxConcurrentSessions        int
	FaultsInjected                               int
	LastAccept                                   string // Accept header of the latest request that had one
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	now := s.cfg.Now()
	s.ctl.Lock()
	defer s.ctl.Unlock()
	st := s.stats
	st.ActiveSessions = s.liveCountLocked(now)
	return st
}

// SetFaults replaces the fault configuration. Rates are clamped to [0,1]
// and negative delays to 0.
func (s *Server) SetFaults(f Faults) {
	for _, p := range []*float64{&f.ServerErrorRate, &f.HTMLRate, &f.TruncateRate, &f.GarbageRate, &f.DropRate, &f.SlowRate, &f.ChangeWhilePaging} {
		if !(*p >= 0) { // also NaN
			*p = 0
		}
		*p = min(*p, 1)
	}
	f.Latency = max(f.Latency, 0)
	f.SlowDelay = max(f.SlowDelay, 0)
	s.ctl.Lock()
	s.faults = f
	s.ctl.Unlock()
}

// SetLimits replaces the throttling limits (zero fields take the defaults).
// Running periods keep their start and their count.
func (s *Server) SetLimits(l Limits) {
	s.ctl.Lock()
	s.limits = l.withDefaults()
	s.ctl.Unlock()
}

// SetMaxSessions changes the number of concurrent live sessions allowed
// (n <= 0: the default 3); the sessions open now stay open.
func (s *Server) SetMaxSessions(n int) {
	if n <= 0 {
		n = 3
	}
	s.ctl.Lock()
	s.cfg.MaxSessions = n
	s.ctl.Unlock()
}

// SetBeforeSearch installs fn, called for every authorized, valid search
// request with its effective page number before its result is computed,
// outside the simulator's locks: a test can mutate orders between the page
// requests of one scan. nil removes it.
func (s *Server) SetBeforeSearch(fn func(r *http.Request, page int)) {
	s.ctl.Lock()
	s.beforeSearch = fn
	s.ctl.Unlock()
}

// writeJSON writes a JSON response with an exact Content-Length.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// errorBody is the object-shaped error of the service:
// {"error":{"message":"...","code":N}}.
func errorBody(msg string, code int) []byte {
	b := append([]byte(nil), `{"error":{"message":`...)
	b = appendJSONString(b, msg)
	b = append(b, `,"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	return append(b, "}}"...)
}

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
