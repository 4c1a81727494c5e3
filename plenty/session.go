package plenty

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// tokenResponse accepts the login response in snake_case, camelCase or both.
type tokenResponse struct {
	TokenType    string   `json:"token_type"`
	ExpiresIn    *FlexInt `json:"expires_in"`
	AccessToken  string   `json:"access_token"`
	RefreshToken string   `json:"refresh_token"`

	TokenTypeCamel    string   `json:"tokenType"`
	ExpiresInCamel    *FlexInt `json:"expiresIn"`
	AccessTokenCamel  string   `json:"accessToken"`
	RefreshTokenCamel string   `json:"refreshToken"`
}

// DecodeToken decodes a login or refresh response; expires_in is seconds
// counted from now. A response without an access token or a lifetime is an error.
func DecodeToken(body []byte, now time.Time) (Token, error) {
	var r tokenResponse
	// The body holds tokens: no error may quote it.
	if err := json.Unmarshal(body, &r); err != nil {
		return Token{}, &DecodeError{What: "login response", Body: []byte("(not shown: may hold a token)"), Err: errors.New("not a token response")}
	}
	t := Token{
		AccessToken:  first(r.AccessToken, r.AccessTokenCamel),
		RefreshToken: first(r.RefreshToken, r.RefreshTokenCamel),
		TokenType:    first(r.TokenType, r.TokenTypeCamel),
	}
	exp := r.ExpiresIn
	if exp == nil {
		exp = r.ExpiresInCamel
	}
	if t.AccessToken == "" || exp == nil || *exp <= 0 || *exp > 10*365*86400 {
		return Token{}, &DecodeError{What: "login response", Body: []byte("(not shown: may hold a token)"),
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
		var n FlexInt
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
// service (sessMu held). A login whose answer was lost may have opened a
// session the client cannot use and the service keeps until it expires: the
// guard remembers when each such session ends at the latest, never lets them
// and the next login reach the shop's session limit (so the shop's other
// integrations always have a session left), and spaces logins out after
// each lost answer: LoginSpacing, doubling up to LoginBackoff.
type loginGuard struct {
	notBefore time.Time     // no login before this
	reason    error         // why
	spacing   time.Duration // wait after the next lost answer
	unsure    []time.Time   // latest end of each session a lost answer may have opened
	limit     int           // the shop's session limit (max_current_sessions)
	lifetime  time.Duration // lifetime of the last session obtained; 0 = not seen yet
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
func (c *Client) session(ctx context.Context) (Token, error) {
	c.sessMu.Lock()
	defer c.sessMu.Unlock()
	if !c.tokenLoaded {
		t, err := c.cfg.Tokens.LoadToken(ctx)
		if err != nil {
			return Token{}, fmt.Errorf("load stored token: %w", err)
		}
		c.token, c.tokenLoaded = t, true
	}
	now := c.now()
	if c.token.Valid(now, 0) {
		if !c.cfg.NoRenew && !c.refreshRefused && c.token.RefreshToken != "" && !now.Before(c.refreshRetry) && !c.token.Valid(now, c.cfg.RenewBefore) {
			c.refresh(ctx)
		}
		return c.token, nil
	}
	g := &c.logins
	if now.Before(g.notBefore) {
		return Token{}, &LoginHeldError{Until: g.notBefore, Reason: g.reason}
	}
	g.unsure = slices.DeleteFunc(g.unsure, func(end time.Time) bool { return !end.After(now) })
	if n, own := len(g.unsure), max(g.limit-1, 1); n >= own {
		first := slices.MinFunc(g.unsure, time.Time.Compare)
		return Token{}, &LoginHeldError{Until: first, Reason: fmt.Errorf(
			"%d logins whose answers were lost may have opened sessions that live until %s at the latest; a new login could leave the shop's other integrations none of its %d: %w",
			n, first.Format(time.RFC3339), g.limit, ErrAnswerLost)}
	}
	return c.login(ctx)
}

// login makes one login request (runs with sessMu held). Only failures that
// cannot have opened a session are retried inside (no connection, 429
// throttling); any other failure holds back the next login.
func (c *Client) login(ctx context.Context) (Token, error) {
	body, _ := json.Marshal(map[string]string{"username": c.cfg.Username, "password": c.cfg.Password})
	var (
		tok  Token
		life time.Duration // expires_in salvaged from a lost answer
	)
	err := c.call(ctx, request{
		op: "login", route: RouteLogin, method: http.MethodPost, path: "/rest/login", body: body, final: true,
		decode: func(b []byte) (err error) {
			var limit struct {
				Max FlexInt `json:"max_current_sessions"`
			}
			if json.Unmarshal(b, &limit) == nil && limit.Max > 0 {
				c.logins.limit = int(limit.Max)
			}
			tok, err = DecodeToken(b, c.now())
			return err
		},
		salvage: func(b []byte) { life = salvageLifetime(b) },
	})
	res := loginResult(err)
	if c.cfg.OnLogin != nil {
		c.cfg.OnLogin(res)
	}
	g := &c.logins
	now := c.now()
	switch res {
	case LoginOK:
		g.spacing = c.cfg.LoginSpacing
		g.lifetime = tok.ExpiresAt.Sub(now)
		c.log.Info("logged in", "expires_at", tok.ExpiresAt.Format(time.RFC3339))
		c.setToken(ctx, tok)
		return tok, nil
	case LoginAmbiguous:
		if life <= 0 {
			life = g.lifetime
		}
		if life <= 0 {
			life = c.cfg.SessionLifetime
		}
		g.unsure = append(g.unsure, now.Add(life))
		g.notBefore, g.reason = now.Add(g.spacing), err
		g.spacing = min(2*g.spacing, max(c.cfg.LoginBackoff, c.cfg.LoginSpacing))
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
	return Token{}, err
}

// refresh renews the session through POST /rest/login/refresh. The body is
// not documented; {"refresh_token": ...} is what real systems accept. If the
// service refuses, the client keeps the token until it expires and then logs
// in again. Runs with sessMu held; failures are not fatal.
func (c *Client) refresh(ctx context.Context) {
	body, _ := json.Marshal(map[string]string{"refresh_token": c.token.RefreshToken})
	var tok Token
	err := c.call(ctx, request{
		op: "refresh token", route: RouteRefresh, method: http.MethodPost, path: "/rest/login/refresh",
		body: body, auth: false, final: true,
		decode: func(b []byte) (err error) {
			tok, err = DecodeToken(b, c.now())
			return err
		},
	})
	var apiErr *APIError
	switch {
	case err == nil:
		c.log.Info("session renewed", "expires_at", tok.ExpiresAt.Format(time.RFC3339))
		c.setToken(ctx, tok)
	case errors.As(err, &apiErr) && !apiErr.Retryable():
		c.refreshRefused = true
		c.log.Warn("the service does not renew sessions; logging in again when the token expires", "err", err)
	default:
		c.refreshRetry = c.now().Add(time.Minute)
		c.log.Warn("session renewal failed; using the current token, trying again in a minute", "err", err)
	}
}

func (c *Client) setToken(ctx context.Context, t Token) {
	c.token = t
	if err := c.cfg.Tokens.SaveToken(ctx, t); err != nil {
		c.log.Warn("could not persist the session token; a restart will log in again", "err", err)
	}
}

// dropToken forgets a token the service rejected (401), unless another call
// already replaced it.
func (c *Client) dropToken(ctx context.Context, rejected Token) {
	c.sessMu.Lock()
	defer c.sessMu.Unlock()
	if c.token.AccessToken == rejected.AccessToken {
		c.log.Info("session token rejected by the service; logging in again")
		c.setToken(ctx, Token{})
	}
}

func isStatus(err error, status int) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.Status == status
}

// blockLogin holds back new logins for LoginBackoff (sessMu held).
func (c *Client) blockLogin(err error) {
	g := &c.logins
	g.notBefore, g.reason = c.now().Add(c.cfg.LoginBackoff), err
	c.log.Error("login refused; no new login before the backoff has passed",
		"err", err, "retry_at", g.notBefore.Format(time.RFC3339))
}

// holdLogin is blockLogin for callers without sessMu.
func (c *Client) holdLogin(err error) {
	c.sessMu.Lock()
	defer c.sessMu.Unlock()
	c.blockLogin(err)
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
