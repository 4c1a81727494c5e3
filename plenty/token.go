package plenty

import (
	"context"
	"time"
)

// Token is a session of the service: the bearer token, its refresh token and
// the moment it expires (computed from expires_in, seconds, at login).
type Token struct {
	AccessToken  string
	RefreshToken string
	TokenType    string
	ExpiresAt    time.Time
}

// Valid reports whether the token is set and not expired at now, keeping a
// margin before the expiry.
func (t Token) Valid(now time.Time, margin time.Duration) bool {
	return t.AccessToken != "" && now.Add(margin).Before(t.ExpiresAt)
}

// TokenStore persists the session across restarts so that a restart reuses it
// instead of opening a new session (the service allows only a few at once).
type TokenStore interface {
	// LoadToken returns the stored token, or the zero Token when there is none.
	LoadToken(ctx context.Context) (Token, error)
	// SaveToken stores the token; the zero Token clears it.
	SaveToken(ctx context.Context, t Token) error
}

// MemoryTokenStore keeps the token in memory only (tests, the demo).
type MemoryTokenStore struct{ t Token }

func (m *MemoryTokenStore) LoadToken(context.Context) (Token, error)   { return m.t, nil }
func (m *MemoryTokenStore) SaveToken(_ context.Context, t Token) error { m.t = t; return nil }
