package plenty

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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
	if now.Before(c.loginBlocked) {
		return Token{}, fmt.Errorf("login held back until %s: %w", c.loginBlocked.Format(time.RFC3339), c.loginBlockErr)
	}
	return c.login(ctx)
}

// login runs with sessMu held.
func (c *Client) login(ctx context.Context) (Token, error) {
	body, _ := json.Marshal(map[string]string{"username": c.cfg.Username, "password": c.cfg.Password})
	var tok Token
	err := c.call(ctx, request{
		op: "login", route: RouteLogin, method: http.MethodPost, path: "/rest/login", body: body, final: true,
		decode: func(b []byte) (err error) {
			tok, err = DecodeToken(b, c.now())
			return err
		},
	})
	if err != nil {
		var de *DecodeError
		if errors.Is(err, ErrSessionLimit) || errors.Is(err, ErrInvalidCredentials) || isStatus(err, http.StatusUnauthorized) || errors.As(err, &de) {
			c.blockLogin(err)
		}
		return Token{}, err
	}
	c.log.Info("logged in", "expires_at", tok.ExpiresAt.Format(time.RFC3339))
	c.setToken(ctx, tok)
	return tok, nil
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
	c.loginBlocked = c.now().Add(c.cfg.LoginBackoff)
	c.loginBlockErr = err
	c.log.Error("login refused; no new login before the backoff has passed",
		"err", err, "retry_at", c.loginBlocked.Format(time.RFC3339))
}

// holdLogin is blockLogin for callers without sessMu.
func (c *Client) holdLogin(err error) {
	c.sessMu.Lock()
	defer c.sessMu.Unlock()
	c.blockLogin(err)
}
