// Package plenty is the REST client of the commerce service: login with token
// reuse and refresh, versioned Accept header, paginated order search, throttle
// pacing, retries with backoff and typed errors. It follows the service's
// documented conventions and the behaviour of real systems described in
// DESIGN.md. The order model it sends and decodes (orders, filters, queries,
// pages, the session token) is package plenty/order.
package plenty

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// Routes as labelled in CallInfo (and so in metrics).
const (
	RouteLogin   = "login"
	RouteRefresh = "login_refresh"
	RouteSearch  = "orders_search"
)

// maxBody bounds a response body; an order page of 250 entries is ~100 KiB.
const maxBody = 64 << 20

// RetryConfig is the backoff of retryable failures (5xx, network errors,
// bodies that are cut short or not JSON).
type RetryConfig struct {
	Initial    time.Duration // first wait; default 500ms
	Max        time.Duration // cap of one wait; default 30s
	MaxElapsed time.Duration // give up after this long; default 2m; <0 = never
}

// CallInfo describes one HTTP exchange with the service, for metrics.
type CallInfo struct {
	Route    string
	Status   int // 0 when no response arrived
	Duration time.Duration
	Throttle Throttle
	Err      error // transport or body error, nil when a response was read
}

// Config configures a Client. BaseURL, Username and Password are required.
type Config struct {
	BaseURL  string // e.g. https://shop.example/ (the /rest prefix is added)
	Username string
	Password string

	// APIVersion selects Accept: application/x.<APIVendor>.v<N>+json; 0 sends
	// application/json and gets the newest version.
	APIVersion int
	APIVendor  string // default "service", as in the spec's example

	HTTPClient *http.Client  // default: a client with its own transport
	Timeout    time.Duration // per request, including reading the body; default 30s
	UserAgent  string        // default "orderwatch"

	Tokens TokenStore // where the session is kept across restarts; default in memory
	// Sessions keeps the login guard across restarts (record "sessions":
	// pending login waits, sessions that may be open without a token);
	// nil = in memory only.
	Sessions SessionRecords
	// RenewBefore: a token this close to its expiry is renewed through
	// POST /rest/login/refresh where the service accepts it. Default 10m.
	RenewBefore time.Duration
	// NoRenew never renews a session (watcher check: renewing would rotate
	// the running watcher's token).
	NoRenew bool
	// LoginBackoff: after a session-limit 429 or refused credentials, no
	// login is tried again for this long. Default 5m.
	LoginBackoff time.Duration
	// LoginSpacing: after a login whose answer was lost (it may have
	// opened a session), no login for this long; it doubles with every
	// further lost answer, up to LoginBackoff, and starts again after a
	// login that works. Default 5s.
	LoginSpacing time.Duration
	// MaxSessions is the shop's limit of concurrent sessions until the
	// service names it (max_current_sessions). Logins whose answers were
	// lost never hold, with the next login, all of them. Default 3.
	MaxSessions int
	// SessionLifetime is how long a session is assumed to live when a lost
	// login answer did not say (expires_in) and no login has said it yet.
	// Default 24h (expires_in 86400 on real systems).
	SessionLifetime time.Duration

	Pacer *Pacer // default NewPacer(PacerConfig{})
	Retry RetryConfig

	Logger *slog.Logger
	Now    func() time.Time
	// Monotonic is the time elapsed on a clock that is never stepped; the
	// server-time estimate is carried forward on it. Default: the process's
	// monotonic clock, or Now's own when Now is set (a fake clock).
	Monotonic  func() time.Duration
	OnResponse func(CallInfo)    // called after every exchange (metrics)
	OnLogin    func(LoginResult) // called after every login request (metrics)
	// OnWait is the default pacer's PacerConfig.OnWait: told of every
	// change of the pending wait the service asked for.
	OnWait func(Wait)
	// Waits keeps the default pacer's pending wait across restarts
	// (record "waits", waits.go): restored by New, saved at every change;
	// nil = in memory only.
	Waits WaitRecords
	// OnClockJump is called when a Date header jumps against the
	// monotonic clock (distrusted) and when a new server clock is
	// accepted after it kept saying so (metrics); jump is the move
	// (negative: back).
	OnClockJump func(jump time.Duration, accepted bool)
	// Gate, when set, is asked before every request (logins included); an
	// error stops the call at once, nothing is sent (the lease of a hot
	// standby group: only the active replica calls the service).
	Gate func() error
}

// Client talks to the service. It is safe for concurrent use; logins are
// serialised so that the client never holds two sessions.
type Client struct {
	cfg    Config
	base   *url.URL
	accept string
	http   *http.Client
	log    *slog.Logger
	now    func() time.Time
	pacer  *Pacer

	sessMu         sync.Mutex // held while a token is obtained: one login or renewal in flight at most
	token          order.Token
	tokenLoaded    bool
	logins         loginGuard
	sealer         *sealer   // the session's sealed copy for the group (sealed.go)
	refreshRefused bool      // the service does not renew tokens: re-login on expiry
	refreshRetry   time.Time // no renewal attempt before this (after a transient failure)

	fresh atomic.Bool // the token in hand has not served a call yet (set with sessMu held)

	mono        func() time.Duration
	clockMu     sync.Mutex
	clock       serverClock
	lastFailure string // last logged failure, to log changes only

	sent atomic.Int64 // requests that went out (Calls)
}

// New checks cfg and returns a client. It makes no call.
func New(cfg Config) (*Client, error) {
	base, err := cfg.check()
	if err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if cfg.Pacer == nil {
		cfg.Pacer = cfg.newPacer()
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 4
		hc = &http.Client{Transport: tr}
	}
	accept := "application/json"
	if cfg.APIVersion > 0 {
		accept = fmt.Sprintf("application/x.%s.v%d+json", cfg.APIVendor, cfg.APIVersion)
	}
	seal, err := newSealer(cfg.Password, base.String(), cfg.Username)
	if err != nil {
		return nil, err
	}
	return &Client{
		cfg: cfg, base: base, accept: accept, http: hc,
		log: cfg.Logger, now: cfg.Now, pacer: cfg.Pacer, mono: cfg.Monotonic,
		logins: loginGuard{spacing: cfg.LoginSpacing, limit: cfg.MaxSessions}, sealer: seal,
	}, nil
}

// check refuses a configuration the client cannot work with and returns the
// service's base URL (without a trailing /rest).
func (cfg *Config) check() (*url.URL, error) {
	if cfg.BaseURL == "" {
		return nil, errors.New("plenty: base URL is empty")
	}
	base, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	if err != nil || base.Host == "" || (base.Scheme != "http" && base.Scheme != "https") {
		return nil, fmt.Errorf("plenty: base URL %q: want http(s)://host[/path]", cfg.BaseURL)
	}
	base.Path = strings.TrimSuffix(base.Path, "/rest")
	if cfg.Username == "" || cfg.Password == "" {
		return nil, errors.New("plenty: username and password are required")
	}
	if cfg.APIVersion < 0 {
		return nil, fmt.Errorf("plenty: API version %d: want 0 (newest) or more", cfg.APIVersion)
	}
	return base, nil
}

// setDefaults fills in every unset field.
func (cfg *Config) setDefaults() {
	orDuration := func(d *time.Duration, def time.Duration) {
		if *d <= 0 {
			*d = def
		}
	}
	if cfg.APIVendor == "" {
		cfg.APIVendor = "service"
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "orderwatch"
	}
	if cfg.Tokens == nil {
		cfg.Tokens = &MemoryTokenStore{}
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 3
	}
	orDuration(&cfg.Timeout, 30*time.Second)
	orDuration(&cfg.RenewBefore, 10*time.Minute)
	orDuration(&cfg.LoginBackoff, 5*time.Minute)
	orDuration(&cfg.LoginSpacing, 5*time.Second)
	orDuration(&cfg.SessionLifetime, 24*time.Hour)
	orDuration(&cfg.Retry.Initial, 500*time.Millisecond)
	orDuration(&cfg.Retry.Max, 30*time.Second)
	if cfg.Retry.MaxElapsed == 0 {
		cfg.Retry.MaxElapsed = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Monotonic == nil {
		if cfg.Now == nil {
			start := time.Now()
			cfg.Monotonic = func() time.Duration { return time.Since(start) }
		} else {
			now, start := cfg.Now, cfg.Now()
			cfg.Monotonic = func() time.Duration { return now().Sub(start) }
		}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
}

// newPacer returns the pacer of a client that was given none: it logs its
// blocks, saves its waits to cfg.Waits and starts with the waits saved there.
func (cfg *Config) newPacer() *Pacer {
	log := cfg.Logger
	onWait := cfg.OnWait
	if cfg.Waits != nil {
		onWait = waitSaver(cfg.Waits, log, onWait)
	}
	p := NewPacer(PacerConfig{Now: cfg.Now, OnBlock: func(until time.Time, why string) { logBlock(log, until, why) }, OnWait: onWait})
	if cfg.Waits != nil {
		restoreWaits(p, cfg.Waits, log)
	}
	return p
}

// Pacer returns the client's pacer (its throttle snapshot and wait figures).
func (c *Client) Pacer() *Pacer { return c.pacer }

// Calls returns how many requests have gone out to the service: every
// exchange whose request was written (or answered), logins, refreshes and
// retries included, whether or not an answer came back. This is what the
// service counts against its limits, and what the call budget is charged.
func (c *Client) Calls() int64 { return c.sent.Load() }

// Throttle returns what the service last said of its limits.
func (c *Client) Throttle() Throttle { return c.pacer.Last() }

// ServerNow estimates the service's clock from the Date headers seen so far,
// carried forward on the monotonic clock (a step of the local clock does not
// move it); ok is false before the first response. The estimate errs early
// (Date has whole seconds) and never goes back while the Date headers agree
// with it. It is a hint: a Date that keeps a wrong time for a minute is
// followed; what bounds a watermark is the stamps in the service's data.
func (c *Client) ServerNow() (t time.Time, ok bool) {
	c.clockMu.Lock()
	defer c.clockMu.Unlock()
	return c.clock.now(c.mono())
}

// DateNow is what the latest Date headers say the service's clock is now,
// carried forward on the monotonic clock: ServerNow, or, while Dates that
// jumped are distrusted, the clock they say (a hint that the service's
// clock may have been set, before ServerNow follows it).
func (c *Client) DateNow() (t time.Time, ok bool) {
	c.clockMu.Lock()
	defer c.clockMu.Unlock()
	return c.clock.latest(c.mono())
}

// ClockTrouble describes a Date header that is distrusted right now (it
// jumped against the monotonic clock); "" when the clock is trusted.
func (c *Client) ClockTrouble() string {
	c.clockMu.Lock()
	defer c.clockMu.Unlock()
	if !c.clock.suspect {
		return ""
	}
	return fmt.Sprintf("the service's Date header jumped by %s against the monotonic clock; distrusted for %s so far",
		c.clock.jump.Round(time.Second), (c.mono() - c.clock.suspectSince).Round(time.Second))
}

// SearchOrders fetches one page of order search: GET with simple filters,
// POST when q.Complex is set. Retryable failures are retried with backoff;
// the page is decoded (bad entries reported in Page.Bad).
func (c *Client) SearchOrders(ctx context.Context, q order.Query) (*order.Page, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("search orders: %w", err)
	}
	method, body := http.MethodGet, []byte(nil)
	if q.Complex != nil {
		method = http.MethodPost
		var err error
		if body, err = json.Marshal(q.Complex); err != nil {
			return nil, fmt.Errorf("search orders: encode filter: %w", err)
		}
	}
	var page *order.Page
	err := c.call(ctx, request{
		op: "search orders", route: RouteSearch, method: method,
		path: "/rest/orders/search", query: q.Values(), body: body, auth: true,
		decode: func(b []byte) (err error) {
			page, err = order.DecodePage(b)
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	return page, nil
}

// Pages iterates over the pages of a search from q.Page (default 1) to the
// last, trusting the envelope's page numbers, never the requested size. It
// stops after the first error, which it yields.
func (c *Client) Pages(ctx context.Context, q order.Query) iter.Seq2[*order.Page, error] {
	return func(yield func(*order.Page, error) bool) {
		if q.Page <= 0 {
			q.Page = 1
		}
		for {
			p, err := c.SearchOrders(ctx, q)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(p, nil) {
				return
			}
			if p.IsLastPage || int64(q.Page) >= p.LastPageNumber || len(p.Orders)+len(p.Bad) == 0 {
				return
			}
			q.Page++
		}
	}
}

type request struct {
	op, route, method, path string
	query                   url.Values
	body                    []byte
	auth                    bool
	decode                  func([]byte) error // nil: body ignored
	// final: a failure after the request may have reached the service (no
	// answer, a 2xx that does not decode, a 5xx) is not retried but
	// returned as ErrAnswerLost. Login and refresh: the request may have
	// opened or rotated a session; another try would open another.
	final bool
	// salvage (final requests) gets what arrived of such a lost answer.
	salvage func([]byte)
	// sending, when set, is called before each attempt goes out, after
	// the pacer's wait (a login counts its session as possibly open only
	// then: one still queued behind a wait has sent nothing).
	sending func()
}

// oneAttemptKey marks a context of OneAttempt.
type oneAttemptKey struct{}

// OneAttempt returns a context under which a call of the client makes one
// attempt: a failure it would retry with backoff (a 5xx, a network error,
// a 429, a body that does not decode) is returned at once. It is for a
// caller that has a retry of its own and better work to do meanwhile (the
// poller's retry of quarantined orders by id backs off per order, and the
// sweep's window is not to wait for it). Pacing and a login again after a
// rejected token are as for any call.
func OneAttempt(ctx context.Context) context.Context {
	return context.WithValue(ctx, oneAttemptKey{}, true)
}

// call makes the request with pacing, the session, and retries.
func (c *Client) call(ctx context.Context, r request) error {
	oneAttempt, _ := ctx.Value(oneAttemptKey{}).(bool)
	bo := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(c.cfg.Retry.Initial),
		backoff.WithMaxInterval(c.cfg.Retry.Max),
		backoff.WithMaxElapsedTime(max(c.cfg.Retry.MaxElapsed, 0)),
	), ctx)
	relogged := false
	ctx, sent := r.traceSent(ctx)
	for {
		tok, err := c.ready(ctx, r)
		if err != nil {
			return fmt.Errorf("%s: %w", r.op, err)
		}
		sent.Store(false)
		if r.sending != nil {
			r.sending()
		}
		status, body, err := c.exchange(ctx, r, tok.AccessToken)
		next, err := c.judge(r, tok, status, body, err, sent.Load())
		if next == loginAgain {
			if c.tokenRejected(ctx, tok, err) && !relogged {
				relogged = true
				continue
			}
			return err
		}
		if next != backOff {
			return err
		}
		if oneAttempt {
			return fmt.Errorf("%s: one attempt: %w", r.op, err)
		}
		if err := c.backOff(ctx, r, bo, err); err != nil {
			return err
		}
	}
}

// traceSent returns a context that records, for a final request, whether
// the request went out whole (then it may have reached the service).
func (r request) traceSent(ctx context.Context) (context.Context, *atomic.Bool) {
	var sent atomic.Bool
	if r.final {
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				sent.Store(true)
			}
		}})
	}
	return ctx, &sent
}

// ready waits for the pacer and, for an authenticated request, for a
// session: a login or refresh that went out took the slot, so the request
// is then paced on its own.
func (c *Client) ready(ctx context.Context, r request) (order.Token, error) {
	if err := c.pacer.Wait(ctx); err != nil || !r.auth {
		return order.Token{}, err
	}
	before := c.sent.Load()
	tok, err := c.session(ctx)
	if err != nil {
		return tok, err
	}
	if c.sent.Load() != before {
		err = c.pacer.Wait(ctx)
	}
	return tok, err
}

// step is what call does after an exchange.
type step int

const (
	stop       step = iota // return the error (nil: done)
	backOff                // try again after the backoff
	loginAgain             // the token was rejected: log in again once
)

// judge says what an exchange's outcome means: err is the error to return or
// to retry on.
func (c *Client) judge(r request, tok order.Token, status int, body []byte, err error, sent bool) (step, error) {
	if errors.Is(err, ErrFenced) {
		return stop, fmt.Errorf("%s: %w", r.op, err)
	}
	if err == nil && status/100 == 2 {
		if r.auth {
			c.served(tok)
		}
		if r.decode == nil {
			return stop, nil
		}
		if err = r.decode(body); err == nil {
			c.noteRecovered(r.op)
			return stop, nil
		}
		if r.final {
			return stop, r.lost(body, err)
		}
		// A 200 with a body cut short or not JSON: worth another try.
		return backOff, err
	}
	if err != nil {
		if r.final && sent {
			return stop, r.lost(body, err)
		}
		return backOff, err
	}
	apiErr := c.apiError(r.op, status, body)
	switch {
	case r.final && status >= 500:
		return stop, r.lost(nil, apiErr)
	case status == http.StatusUnauthorized && r.auth:
		// A token that served calls: log in again once. A fresh one:
		// escalating waits, never a burst of logins.
		return loginAgain, apiErr
	case !apiErr.Retryable():
		return stop, apiErr
	}
	return backOff, apiErr
}

// backOff sleeps before the next attempt, or says why there is none.
func (c *Client) backOff(ctx context.Context, r request, bo backoff.BackOff, err error) error {
	wait := bo.NextBackOff()
	if wait == backoff.Stop {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", r.op, ctx.Err())
		}
		return fmt.Errorf("%s: giving up after %s: %w", r.op, c.cfg.Retry.MaxElapsed, err)
	}
	if errors.Is(err, ErrThrottled) {
		// The pacer holds the next call until Retry-After has passed; no
		// backoff on top of it.
		wait = 0
	}
	c.noteFailure(r.op, err, max(wait, c.pacer.NotBefore().Sub(c.now())))
	if err := Sleep(ctx, wait); err != nil {
		return fmt.Errorf("%s: %w", r.op, err)
	}
	return nil
}

// lost reports the failure of a final request after it was sent.
func (r request) lost(partial []byte, err error) error {
	if r.salvage != nil && len(partial) > 0 {
		r.salvage(partial)
	}
	return fmt.Errorf("%s: %w: %w", r.op, ErrAnswerLost, err)
}

// exchange sends one request and reads the whole body. A transport error or
// a body cut short is returned as err (retryable). A request once sent is
// finished even when ctx is cancelled (shutdown), bounded by the timeout:
// its answer may carry a page worth committing, and a login half done
// would leave a session behind.
func (c *Client) exchange(ctx context.Context, r request, access string) (status int, body []byte, err error) {
	if c.cfg.Gate != nil {
		if gerr := c.cfg.Gate(); gerr != nil {
			return 0, nil, fmt.Errorf("%w: %w", ErrFenced, gerr)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeout)
	defer cancel()
	u := *c.base
	u.Path += r.path
	u.RawQuery = r.query.Encode()
	var rd io.Reader
	if r.body != nil {
		rd = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", c.accept)
	req.Header.Set("User-Agent", c.cfg.UserAgent)
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if access != "" {
		req.Header.Set("Authorization", "Bearer "+access)
	}
	var wrote atomic.Bool // the request went out: the service may count it
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) {
		if i.Err == nil {
			wrote.Store(true)
		}
	}}))
	start := c.now()
	info := CallInfo{Route: r.route}
	defer func() {
		if wrote.Load() || info.Status != 0 {
			c.sent.Add(1)
		}
		info.Duration = c.now().Sub(start)
		info.Err = err
		if c.cfg.OnResponse != nil {
			c.cfg.OnResponse(info)
		}
	}()
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", r.op, err)
	}
	defer resp.Body.Close()
	info.Status = resp.StatusCode
	info.Throttle = ParseThrottle(resp.Header, c.now())
	c.observeClock(info.Throttle)
	c.pacer.Observe(resp.StatusCode, info.Throttle)
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil { // what arrived is returned, for salvage
		return resp.StatusCode, body, fmt.Errorf("%s: read body: %w", r.op, err)
	}
	if len(body) > maxBody {
		return resp.StatusCode, nil, fmt.Errorf("%s: body larger than %d bytes", r.op, maxBody)
	}
	return resp.StatusCode, body, nil
}

func (c *Client) observeClock(t Throttle) {
	if t.ServerTime.IsZero() {
		return
	}
	c.clockMu.Lock()
	ev := c.clock.observe(t.ServerTime, c.mono())
	c.clockMu.Unlock()
	switch ev.kind {
	case clockJump:
		c.log.Warn("the service's Date header jumps against the monotonic clock: distrusted, the server-time estimate stays on the monotonic clock",
			"jump", ev.jump.Round(time.Second).String(), "date", t.ServerTime.UTC().Format(time.RFC3339), "accept_after", clockAcceptAfter.String())
	case clockAccepted:
		c.log.Warn("the service's Date header has kept its new time for a minute: followed as a hint for the sweep window; the watermark stays bounded by the order stamps",
			"jump", ev.jump.Round(time.Second).String(), "date", t.ServerTime.UTC().Format(time.RFC3339))
	case clockRecovered:
		c.log.Info("the service's Date header agrees with the monotonic clock again", "date", t.ServerTime.UTC().Format(time.RFC3339))
	}
	if ev.kind != clockOK && ev.kind != clockRecovered && c.cfg.OnClockJump != nil {
		c.cfg.OnClockJump(ev.jump, ev.kind == clockAccepted)
	}
}

// logBlock logs a wait the service asked for that keeps every call back
// for a minute or more, with its end; shorter ones (the short period's
// pacing) only at debug level.
func logBlock(log *slog.Logger, until time.Time, why string) {
	if log == nil {
		return
	}
	d := time.Until(until).Round(time.Second)
	if d < time.Minute {
		log.Debug("waiting for the service's throttling", "until", until.UTC().Format(time.RFC3339), "why", why)
		return
	}
	log.Warn("the service asks for a wait: no call before the time it names", "until", until.UTC().Format(time.RFC3339), "wait", d.String(), "why", why)
}

func (c *Client) apiError(op string, status int, body []byte) *APIError {
	e := &APIError{Op: op, Status: status}
	DecodeErrorBody(e, body)
	if status == http.StatusTooManyRequests {
		if nb := c.pacer.NotBefore(); nb.After(c.now()) {
			e.RetryAfter = nb.Sub(c.now()).Round(time.Second)
		}
	}
	return e
}

// noteFailure logs a retried failure when it differs from the previous one.
func (c *Client) noteFailure(op string, err error, wait time.Duration) {
	c.clockMu.Lock()
	msg := err.Error()
	changed := msg != c.lastFailure
	c.lastFailure = msg
	c.clockMu.Unlock()
	if changed {
		c.log.Warn("service call failed, retrying", "op", op, "err", msg, "retry_in", wait.Round(time.Millisecond))
	} else {
		c.log.Debug("service call failed again, retrying", "op", op, "retry_in", wait.Round(time.Millisecond))
	}
}

func (c *Client) noteRecovered(op string) {
	c.clockMu.Lock()
	had := c.lastFailure != ""
	c.lastFailure = ""
	c.clockMu.Unlock()
	if had {
		c.log.Info("service calls succeed again", "op", op)
	}
}
