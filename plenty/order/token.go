package order

import "time"

// Token is a session of the service: the bearer token, its refresh token and
// the moment it expires (computed from expires_in, seconds, at login). It is
// declared here, beside the order model, so that the state file can keep it
// without importing the HTTP client; the client (plenty) opens and renews it.
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
