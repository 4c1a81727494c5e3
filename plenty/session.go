package plenty

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// tokenResponse accepts the login response in snake_case, camelCase or both.
type tokenResponse struct {
	TokenType    string         `json:"token_type"`
	ExpiresIn    *order.FlexInt `json:"expires_in"`
	AccessToken  string         `json:"access_token"`
	RefreshToken string         `json:"refresh_token"`

	TokenTypeCamel    string         `json:"tokenType"`
	ExpiresInCamel    *order.FlexInt `json:"expiresIn"`
	AccessTokenCamel  string         `json:"accessToken"`
	RefreshTokenCamel string         `json:"refreshToken"`
}

// DecodeToken decodes a login or refresh response; expires_in is seconds
// counted from now. A response without an access token or a lifetime is an error.
func DecodeToken(body []byte, now time.Time) (order.Token, error) {
	var r tokenResponse
	// The body holds tokens: no error may quote it.
	if err := json.Unmarshal(body, &r); err != nil {
		return order.Token{}, &order.DecodeError{What: "login response", Body: []byte("(not shown: may hold a token)"), Err: errors.New("not a token response")}
	}
	t := order.Token{
		AccessToken:  first(r.AccessToken, r.AccessTokenCamel),
		RefreshToken: first(r.RefreshToken, r.RefreshTokenCamel),
		TokenType:    first(r.TokenType, r.TokenTypeCamel),
	}
	exp := r.ExpiresIn
	if exp == nil {
		exp = r.ExpiresInCamel
	}
	if t.AccessToken == "" || exp == nil || *exp <= 0 || *exp > 10*365*86400 {
		return order.Token{}, &order.DecodeError{What: "login response", Body: []byte("(not shown: may hold a token)"),
			Err: errors.New("no access token or no positive expires_in")}
	}
	t.ExpiresAt = now.Add(time.Duration(*exp) * time.Second)
	return t, nil
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// salvageLifetime reads expires_in (or expiresIn) from what arrived of a
// login answer that was cut short, so that the session it may have opened
// is known to end; 0 when it cannot be read. Of several, the longest counts
// (the safe side). The token itself is never taken from a broken answer.
func salvageLifetime(b []byte) time.Duration {
	var longest time.Duration
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return 0
	}
	for {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return longest
		}
		if key != "expires_in" && key != "expiresIn" {
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return longest
			}
			continue
		}
		var n order.FlexInt
		if dec.Decode(&n) != nil {
			return longest
		}
		// A number the cut went through (86400 cut to 864) reads as a
		// smaller one: only a number followed by more of the object counts.
		rest := bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")
		if len(rest) == 0 || rest[0] != ',' && rest[0] != '}' {
			return longest
		}
		if n > 0 && n <= 10*365*86400 {
			longest = max(longest, time.Duration(n)*time.Second)
		}
	}
}

// LoginResult is how one login request ended; the client reports each to
// Config.OnLogin (the label of orderwatch_logins_total).
type LoginResult string

// Login results.
const (
	// LoginOK: a session was opened and its token read.
	LoginOK LoginResult = "ok"
	// LoginRefused: the service said no (wrong credentials, another 4xx):
	// no session was opened.
	LoginRefused LoginResult = "refused"
	// LoginAmbiguous: the request may have reached the service, but no
	// usable answer came back (connection dropped or timed out after the
	// request was sent, a 2xx body cut short or unreadable, a 5xx): a
	// session may exist that the client cannot use.
	LoginAmbiguous LoginResult = "ambiguous"
	// LoginSessionLimit: 429 too_many_concurrent_sessions.
	LoginSessionLimit LoginResult = "session_limit"
	// LoginError: the request cannot have opened a session (no connection,
	// throttled, cancelled before it was sent).
	LoginError LoginResult = "error"
)

// loginResult classifies what login's call returned.
func loginResult(err error) LoginResult {
	var apiErr *APIError
	switch {
	case err == nil:
		return LoginOK
	case errors.Is(err, ErrAnswerLost):
		return LoginAmbiguous
	case errors.Is(err, ErrSessionLimit):
		return LoginSessionLimit
	case errors.As(err, &apiErr) && apiErr.Status/100 == 4 && !apiErr.Retryable():
		return LoginRefused
	}
	return LoginError
}

// LoginHeldError says that no login is made before Until, and why: a
// refused login, the session limit, or earlier logins whose answers were
// lost (they may have opened sessions). errors.Is sees the reason.
type LoginHeldError struct {
	Until  time.Time
	Reason error
}

func (e *LoginHeldError) Error() string {
	return fmt.Sprintf("login held back until %s: %v", e.Until.Format(time.RFC3339), e.Reason)
}

func (e *LoginHeldError) Unwrap() error { return e.Reason }

// loginGuard keeps the client's logins from piling up sessions on the
// service (sessMu held). A login or renewal whose answer was lost may have
// opened a session the client cannot use and the service keeps until it
// expires; so may a fresh token the service rejects (401). The guard
// remembers when each such session ends at the latest, never lets them and
// the next login reach the shop's session limit (so the shop's other
// integrations always have a session left), and spaces logins out after
// each lost answer or rejected fresh token: LoginSpacing, doubling up to
// LoginBackoff. It is kept in Config.Sessions (record "sessions"), so a
// restarted process is bound exactly as the old one.
type loginGuard struct {
	notBefore time.Time     // no login (and no use of a rejected fresh token) before this
	wait      time.Duration // the length notBefore was set to (a restored wait is capped by it)
	reason    error         // why
	spacing   time.Duration // wait after the next lost answer or rejected fresh token
	unsure    []time.Time   // latest end of each session the client may have open without a token for it
	limit     int           // the shop's session limit (max_current_sessions)
	lifetime  time.Duration // lifetime of the last session obtained; 0 = not seen yet
	// rejectedSince: the first 401 to the current token while it was
	// fresh (had not served a call yet); zero when none.
	rejectedSince time.Time
	// owner names this client in the group (sessions_group.go); others
	// are the group's other clients' sessions that may be open; in is
	// what AdoptSessions left to take.
	owner  string
	others map[string]sessionsOf
	in     groupInbox
}

// SessionRecords keeps the login guard across restarts (implemented by
// *state.Store; the client uses the record "sessions"). A missing or
// unreadable record is read as nothing known.
type SessionRecords interface {
	SaveRecord(name string, v any) error
	LoadRecord(name string, v any) (found bool, err error)
}

// SessionsRecord is the name of the login guard's record.
const SessionsRecord = "sessions"

// guardRecord is the JSON of the "sessions" record. Durations are in
// nanoseconds.
type guardRecord struct {
	NotBefore     time.Time     `json:"not_before,omitzero"`
	Wait          time.Duration `json:"wait,omitempty"`
	Reason        string        `json:"reason,omitempty"`
	Kind          string        `json:"kind,omitempty"` // the sentinel the reason matches (errors.Is)
	UnsureEnds    []time.Time   `json:"unsure_ends,omitempty"`
	Limit         int           `json:"limit,omitempty"`
	Spacing       time.Duration `json:"spacing,omitempty"`
	Lifetime      time.Duration `json:"lifetime,omitempty"`
	FreshToken    time.Time     `json:"fresh_token_expires,omitzero"` // the stored token has served no call yet
	RejectedSince time.Time     `json:"fresh_token_rejected_since,omitzero"`
	SavedAt       time.Time     `json:"saved_at"`
	// Owner names the client that saved it (UnsureEnds are its own);
	// Others are the group's other clients' (sessions_group.go).
	Owner  string                `json:"owner,omitempty"`
	Others map[string]sessionsOf `json:"others,omitempty"`
}

// reasonKinds maps a record's Kind to the sentinel a restored reason wraps.
var reasonKinds = []struct {
	kind string
	err  error
}{
	{"session_limit", ErrSessionLimit},
	{"invalid_credentials", ErrInvalidCredentials},
	{"unauthorized", ErrUnauthorized},
	{"answer_lost", ErrAnswerLost},
}

// restoredReason is the reason of a wait set before a restart.
type restoredReason struct {
	text string
	kind error
}

func (r *restoredReason) Error() string { return r.text + " (before a restart)" }
func (r *restoredReason) Unwrap() error { return r.kind }

// loadGuard restores the guard from the record (sessMu held, once). The
// local clock may have been stepped since it was saved: a wait is cut to
// the length it had when it was set, an unsure session to the longest
// lifetime known.
func (c *Client) loadGuard() {
	if c.cfg.Sessions == nil {
		return
	}
	var r guardRecord
	found, err := c.cfg.Sessions.LoadRecord(SessionsRecord, &r)
	if err != nil {
		c.log.Warn("could not read the login guard from the state file; starting without it", "err", err)
		return
	}
	if !found {
		return
	}
	g := &c.logins
	now := c.now()
	if r.Limit > 0 {
		g.limit = r.Limit
	}
	if r.Lifetime > 0 {
		g.lifetime = r.Lifetime
	}
	if r.Spacing > 0 {
		g.spacing = min(r.Spacing, max(c.cfg.LoginBackoff, c.cfg.LoginSpacing))
	}
	if r.NotBefore.After(now) {
		// No wait of the guard is longer than the longest it sets: a
		// record saying otherwise is damaged.
		if longest := max(c.cfg.LoginBackoff, c.cfg.LoginSpacing); r.Wait <= 0 || r.Wait > longest {
			r.Wait = longest
		}
		g.notBefore, g.wait = r.NotBefore, r.Wait
		if r.NotBefore.Sub(now) > r.Wait {
			g.notBefore = now.Add(r.Wait)
		}
		g.reason = restoredKind(r.Reason, r.Kind)
	}
	longest := max(g.lifetime, c.cfg.SessionLifetime)
	capped := func(ends []time.Time) (out []time.Time) {
		for _, end := range ends {
			if end.After(now) {
				out = append(out, minTime(end, now.Add(longest)))
			}
		}
		return out
	}
	// The sessions of the record's writer (an earlier process, the
	// replica this one took over from: it may still run) and of the
	// group's other clients are theirs: a later record of theirs says
	// which are closed. An earlier version's record names no writer.
	g.others = map[string]sessionsOf{}
	if r.Owner == "" {
		g.unsure = append(g.unsure, capped(r.UnsureEnds)...)
	}
	for k, o := range r.clients() {
		if k != g.ownerID() {
			o.Ends = capped(o.Ends)
			noteOthers(g.others, k, o, now)
		}
	}
	if !r.FreshToken.IsZero() && r.FreshToken.Equal(c.token.ExpiresAt) {
		c.fresh.Store(true)
		g.rejectedSince = r.RejectedSince
	}
	if n := g.open(now); !g.notBefore.IsZero() || n > 0 {
		c.log.Info("login guard restored from the state file", "no_login_before", g.notBefore.Format(time.RFC3339),
			"reason", r.Reason, "unsure_sessions", n, "session_limit", g.limit)
	}
}

// saveGuard persists the guard (sessMu held).
func (c *Client) saveGuard() {
	if c.cfg.Sessions == nil {
		return
	}
	g := &c.logins
	r := guardRecord{Limit: g.limit, Spacing: g.spacing, Lifetime: g.lifetime, UnsureEnds: g.unsure, SavedAt: c.now(),
		Owner: g.ownerID(), Others: maps.Clone(g.others)}
	if g.notBefore.After(r.SavedAt) {
		r.NotBefore, r.Wait = g.notBefore, g.wait
		if g.reason != nil {
			r.Reason = g.reason.Error()
			for _, k := range reasonKinds {
				if errors.Is(g.reason, k.err) {
					r.Kind = k.kind
					break
				}
			}
		}
	}
	if c.fresh.Load() {
		r.FreshToken, r.RejectedSince = c.token.ExpiresAt, g.rejectedSince
	}
	if err := c.cfg.Sessions.SaveRecord(SessionsRecord, r); err != nil {
		c.log.Warn("could not persist the login guard; a restart may forget a pending login wait", "err", err)
	}
}

// hold sets a wait before the next login (sessMu held).
func (g *loginGuard) hold(now time.Time, d time.Duration, why error) {
	g.notBefore, g.wait, g.reason = now.Add(d), d, why
}

// own is how many sessions the client may have open at once: the shop's
// limit less one for its other integrations, at least one.
func (g *loginGuard) own() int { return max(g.limit-1, 1) }

// prune forgets unsure sessions that must have ended by now.
func (g *loginGuard) prune(now time.Time) {
	g.unsure = slices.DeleteFunc(g.unsure, func(end time.Time) bool { return !end.After(now) })
}

// mayRenew reports whether a renewal may be tried: its answer may be lost
// while the service opened a new session and kept the old one, so the
// current session, the unsure ones and one more must fit.
func (g *loginGuard) mayRenew(now time.Time) bool {
	return g.open(now)+2 <= max(g.own(), 2)
}

// Login opens a session now unless the client holds a live one. Calls log in
// on their own; Login is for checks (watcher check) and tests.
func (c *Client) Login(ctx context.Context) error {
	_, err := c.session(ctx)
	return err
}

// session returns a live token: the one in hand or in the store, renewed
// when close to expiry where the service allows, else a new login. Logging in
// only when no live token exists keeps the client at one session.
func (c *Client) session(ctx context.Context) (order.Token, error) {
	c.sessMu.Lock()
	defer c.sessMu.Unlock()
	if !c.tokenLoaded {
		t, err := c.cfg.Tokens.LoadToken(ctx)
		if err != nil {
			return order.Token{}, fmt.Errorf("load stored token: %w", err)
		}
		c.token, c.tokenLoaded = t, true
		c.loadGuard()
		c.takeSealed(ctx)
	}
	now := c.now()
	g := &c.logins
	c.adoptGroup(now)
	if c.token.Valid(now, 0) {
		if !g.rejectedSince.IsZero() && now.Before(g.notBefore) {
			// A fresh token the service rejected: tried again later, no
			// new login meanwhile.
			return order.Token{}, &LoginHeldError{Until: g.notBefore, Reason: g.reason}
		}
		if !c.cfg.NoRenew && !c.refreshRefused && c.token.RefreshToken != "" && !now.Before(c.refreshRetry) &&
			!c.token.Valid(now, c.renewBefore()) && g.mayRenew(now) {
			c.refresh(ctx)
		}
		return c.token, nil
	}
	if now.Before(g.notBefore) {
		return order.Token{}, &LoginHeldError{Until: g.notBefore, Reason: g.reason}
	}
	if n := g.open(now); n >= g.own() {
		first := g.firstEnd()
		return order.Token{}, &LoginHeldError{Until: first, Reason: fmt.Errorf(
			"%d sessions may be open that this client has no token for (logins or renewals whose answers were lost, fresh tokens the service rejected), live until %s at the latest; a new login could leave the shop's other integrations none of its %d: %w",
			n, first.Format(time.RFC3339), g.limit, ErrAnswerLost)}
	}
	return c.login(ctx)
}

// lostLifetime is how long a session whose answer was lost may live: what
// arrived of the answer says, else the last session's lifetime, else
// SessionLifetime.
func (c *Client) lostLifetime(salvaged time.Duration) time.Duration {
	switch {
	case salvaged > 0:
		return salvaged
	case c.logins.lifetime > 0:
		return c.logins.lifetime
	}
	return c.cfg.SessionLifetime
}

// login makes one login request (runs with sessMu held). Only failures that
// cannot have opened a session are retried inside (no connection, 429
// throttling); any other failure holds back the next login. When the
// request is about to go out (after the pacer's wait, not while it is
// queued behind one) the session it may open is recorded as unsure, so
// that a process killed before the answer arrives leaves it counted, and
// one killed while its login waits leaves nothing.
func (c *Client) login(ctx context.Context) (order.Token, error) {
	body, _ := json.Marshal(map[string]string{"username": c.cfg.Username, "password": c.cfg.Password})
	var (
		tok        order.Token
		life       time.Duration // expires_in salvaged from a lost answer
		concurrent int           // concurrent_sessions of the answer (this one included); 0 = not said
	)
	g := &c.logins
	counted := false
	err := c.call(ctx, request{
		sending: func() {
			if !counted {
				counted = true
				g.unsure = append(g.unsure, c.now().Add(c.lostLifetime(0)))
				c.saveGuard()
			}
		},
		op: "login", route: RouteLogin, method: http.MethodPost, path: "/rest/login", body: body, final: true,
		decode: func(b []byte) (err error) {
			var n struct {
				Max     order.FlexInt `json:"max_current_sessions"`
				Current order.FlexInt `json:"concurrent_sessions"`
			}
			if json.Unmarshal(b, &n) == nil {
				if n.Max > 0 {
					c.logins.limit = int(n.Max)
				}
				concurrent = int(n.Current)
			}
			tok, err = DecodeToken(b, c.now())
			return err
		},
		salvage: func(b []byte) { life = salvageLifetime(b) },
	})
	if counted {
		g.unsure = g.unsure[:len(g.unsure)-1] // the request's outcome is known now
	}
	res := loginResult(err)
	if c.cfg.OnLogin != nil {
		c.cfg.OnLogin(res)
	}
	now := c.now()
	switch res {
	case LoginOK:
		g.lifetime = tok.ExpiresAt.Sub(now)
		g.rejectedSince = time.Time{}
		if concurrent > 0 {
			// The service counts the sessions open now: at most
			// concurrent-1 of the unsure ones (the group's included) can
			// still be.
			g.trim(concurrent - 1)
		}
		c.log.Info("logged in", "expires_at", tok.ExpiresAt.Format(time.RFC3339))
		c.setToken(ctx, tok)
		c.fresh.Store(true)
		c.saveGuard()
		return tok, nil
	case LoginAmbiguous:
		life = c.lostLifetime(life)
		g.unsure = append(g.unsure, now.Add(life))
		c.spaceOut(now, err)
		c.log.Warn("login answer lost after the request was sent: a session may exist on the service; logins are spaced out",
			"err", err, "next_login_at", g.notBefore.Format(time.RFC3339), "unsure_sessions", len(g.unsure),
			"session_limit", g.limit, "unsure_session_ends", now.Add(life).Format(time.RFC3339))
	case LoginSessionLimit:
		var apiErr *APIError
		if errors.As(err, &apiErr) && apiErr.MaxSessions > 0 {
			g.limit = apiErr.MaxSessions
		}
		c.blockLogin(err)
	case LoginRefused:
		if errors.Is(err, ErrInvalidCredentials) || isStatus(err, http.StatusUnauthorized) {
			c.blockLogin(err)
		}
	}
	c.saveGuard()
	return order.Token{}, err
}

// spaceOut holds the next login for the current spacing and doubles it, up
// to LoginBackoff (sessMu held).
func (c *Client) spaceOut(now time.Time, why error) {
	g := &c.logins
	g.hold(now, g.spacing, why)
	g.spacing = min(2*g.spacing, max(c.cfg.LoginBackoff, c.cfg.LoginSpacing))
}

// refresh renews the session through POST /rest/login/refresh. The body is
// not documented; {"refresh_token": ...} is what real systems accept. If the
// service refuses, the client keeps the token until it expires and then logs
// in again. Runs with sessMu held; failures are not fatal. A renewal whose
// answer was lost may have renewed the session under tokens the client never
// got (the current token then answers 401) or opened a second one: either
// way one more session is counted until it must have expired, and the
// current one stays counted as long as its token lives.
func (c *Client) refresh(ctx context.Context) {
	body, _ := json.Marshal(map[string]string{"refresh_token": c.token.RefreshToken})
	var (
		tok  order.Token
		life time.Duration
	)
	g := &c.logins
	counted := false // as for a login: counted once it goes out, not while queued
	err := c.call(ctx, request{
		sending: func() {
			if !counted {
				counted = true
				g.unsure = append(g.unsure, c.now().Add(c.lostLifetime(0)))
				c.saveGuard()
			}
		},
		op: "refresh token", route: RouteRefresh, method: http.MethodPost, path: "/rest/login/refresh",
		body: body, auth: false, final: true,
		decode: func(b []byte) (err error) {
			tok, err = DecodeToken(b, c.now())
			return err
		},
		salvage: func(b []byte) { life = salvageLifetime(b) },
	})
	if counted {
		g.unsure = g.unsure[:len(g.unsure)-1]
	}
	now := c.now()
	var apiErr *APIError
	switch {
	case err == nil:
		c.log.Info("session renewed", "expires_at", tok.ExpiresAt.Format(time.RFC3339))
		c.setToken(ctx, tok)
		c.fresh.Store(true)
		g.rejectedSince = time.Time{}
	case errors.Is(err, ErrAnswerLost):
		life = c.lostLifetime(life)
		g.unsure = append(g.unsure, now.Add(life))
		c.refreshRetry = now.Add(time.Minute)
		c.log.Warn("session renewal answer lost after the request was sent: the session may have been renewed under tokens this client does not have, or a second one opened; counted as open",
			"err", err, "unsure_sessions", len(g.unsure), "unsure_session_ends", now.Add(life).Format(time.RFC3339))
	case errors.As(err, &apiErr) && !apiErr.Retryable():
		c.refreshRefused = true
		c.log.Warn("the service does not renew sessions; logging in again when the token expires", "err", err)
	default:
		c.refreshRetry = now.Add(time.Minute)
		c.log.Warn("session renewal failed; using the current token, trying again in a minute", "err", err)
	}
	c.saveGuard()
}

func (c *Client) setToken(ctx context.Context, t order.Token) {
	c.token = t
	c.fresh.Store(false)
	if err := c.cfg.Tokens.SaveToken(ctx, t); err != nil {
		c.log.Warn("could not persist the session token; a restart will log in again", "err", err)
	}
	c.saveSealed(t)
}

// served notes that tok was accepted by the service (a 2xx to a call made
// with it): it is no longer fresh, and the spacing of logins starts over.
func (c *Client) served(tok order.Token) {
	if !c.fresh.Load() {
		return
	}
	c.sessMu.Lock()
	defer c.sessMu.Unlock()
	if !c.fresh.Load() || c.token.AccessToken != tok.AccessToken {
		return
	}
	c.fresh.Store(false)
	c.logins.rejectedSince = time.Time{}
	c.logins.spacing = c.cfg.LoginSpacing
	c.saveGuard()
}

// tokenRejected handles a 401 to a call made with tok. A token that has
// served calls is taken as ended by the service (the meaning of 401): it is
// dropped and the call may log in again at once (retry true). A fresh token
// (no call served yet) is not: the service may not know it yet, or may keep
// its session while refusing it, so another login now could pile up
// sessions. The token is tried again after an escalating wait (LoginSpacing,
// doubling up to LoginBackoff); once it has been refused for LoginBackoff it
// is dropped and its session counted as open until the token's expiry (a
// 401 does not prove it gone), and the next login waits its turn.
func (c *Client) tokenRejected(ctx context.Context, tok order.Token, why error) (retry bool) {
	c.sessMu.Lock()
	defer c.sessMu.Unlock()
	if c.token.AccessToken != tok.AccessToken {
		return true // another call already replaced it
	}
	if !c.fresh.Load() {
		c.log.Info("session token rejected by the service; logging in again")
		c.setToken(ctx, order.Token{})
		c.saveGuard()
		return true
	}
	g := &c.logins
	now := c.now()
	if g.rejectedSince.IsZero() {
		g.rejectedSince = now
	}
	if now.Sub(g.rejectedSince) >= c.cfg.LoginBackoff {
		g.unsure = append(g.unsure, tok.ExpiresAt)
		g.rejectedSince = time.Time{}
		c.setToken(ctx, order.Token{})
		c.spaceOut(now, why)
		c.log.Error("a fresh session token is still rejected by the service; dropped, its session counted as open until it expires",
			"err", why, "next_login_at", g.notBefore.Format(time.RFC3339), "unsure_sessions", len(g.unsure),
			"session_limit", g.limit, "unsure_session_ends", tok.ExpiresAt.Format(time.RFC3339))
	} else {
		c.spaceOut(now, why)
		c.log.Warn("a fresh session token was rejected by the service; trying it again later, no new login meanwhile",
			"err", why, "retry_at", g.notBefore.Format(time.RFC3339), "rejected_since", g.rejectedSince.Format(time.RFC3339))
	}
	c.saveGuard()
	return false
}

func isStatus(err error, status int) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.Status == status
}

// blockLogin holds back new logins for LoginBackoff (sessMu held).
func (c *Client) blockLogin(err error) {
	g := &c.logins
	g.hold(c.now(), c.cfg.LoginBackoff, err)
	c.log.Error("login refused; no new login before the backoff has passed",
		"err", err, "retry_at", g.notBefore.Format(time.RFC3339))
}

// LoginHeld reports until when the client makes no login, and why (refused
// credentials, the session limit, lost login answers); a zero time when
// logins are not held back. It never waits for a login in flight: while one
// runs it reports nothing held.
func (c *Client) LoginHeld() (until time.Time, reason error) {
	if !c.sessMu.TryLock() {
		return time.Time{}, nil
	}
	defer c.sessMu.Unlock()
	if g := &c.logins; c.now().Before(g.notBefore) {
		return g.notBefore, g.reason
	}
	return time.Time{}, nil
}

// renewBefore is how close to its expiry a token is renewed: RenewBefore,
// or half the sessions' lifetime for sessions no longer than RenewBefore
// (a service with short sessions would otherwise be asked for a renewal
// before every call).
func (c *Client) renewBefore() time.Duration {
	if l := c.logins.lifetime; l > 0 && l <= c.cfg.RenewBefore {
		return l / 2
	}
	return c.cfg.RenewBefore
}
