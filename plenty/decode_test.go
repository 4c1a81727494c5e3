package plenty

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeToken(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for _, f := range []string{"login-snake.json", "login-camel.json", "login-both.json"} {
		tok, err := DecodeToken(fixture(t, f), now)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if tok.AccessToken != "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.example-access" || tok.RefreshToken != "def50200example-refresh" ||
			tok.TokenType != "Bearer" || !tok.ExpiresAt.Equal(now.Add(86400*time.Second)) {
			t.Errorf("%s: %+v", f, tok)
		}
	}
	for _, bad := range []string{`{}`, `{"access_token":"x"}`, `{"access_token":"x","expires_in":0}`, `not json`, `{"accessToken":"x","expiresIn":"soon"}`} {
		_, err := DecodeToken([]byte(bad), now)
		if err == nil {
			t.Errorf("DecodeToken(%s): want an error", bad)
		}
		if err != nil && strings.Contains(err.Error(), "x\"") {
			t.Errorf("the error must not echo the token: %v", err)
		}
	}
}

func TestDecodeErrorBody(t *testing.T) {
	tests := []struct {
		file, body  string
		status      int
		code, msg   string
		maxSessions int
		is          error
		retryable   bool
	}{
		{file: "error-429-throttle.json", status: 429, code: "429", msg: "short period read limit reached", is: ErrThrottled, retryable: true},
		{file: "error-429-sessions.json", status: 429, code: "too_many_concurrent_sessions", msg: "Too many users. Only 3 users can be logged in simultaneously. Please try again later.", maxSessions: 3, is: ErrSessionLimit},
		{file: "error-401-login.json", status: 401, code: "invalid_credentials", msg: "The user credentials were incorrect.", is: ErrInvalidCredentials},
		{file: "error-401-token.json", status: 401, code: "401", msg: "Unauthenticated.", is: ErrUnauthorized},
		{file: "error-403.json", status: 403, msg: "This action is unauthorized."},
		{body: "<html><h1>502 Bad Gateway</h1></html>", status: 502, retryable: true},
		{body: `{"error":42}`, status: 500, code: "42", retryable: true},
		{body: `{"error":null,"message":"boom"}`, status: 400, msg: "boom"},
	}
	for _, tt := range tests {
		body := []byte(tt.body)
		if tt.file != "" {
			body = fixture(t, tt.file)
		}
		e := &APIError{Op: "test", Status: tt.status}
		DecodeErrorBody(e, body)
		if e.Code != tt.code || e.Message != tt.msg || e.MaxSessions != tt.maxSessions {
			t.Errorf("%s%s: code %q msg %q max %d", tt.file, tt.body, e.Code, e.Message, e.MaxSessions)
		}
		if tt.is != nil && !errors.Is(e, tt.is) {
			t.Errorf("%s: errors.Is(%v) = false", tt.file, tt.is)
		}
		if e.Retryable() != tt.retryable {
			t.Errorf("%s%s: Retryable = %v", tt.file, tt.body, e.Retryable())
		}
		if e.Code == "" && e.Message == "" && e.Body == "" {
			t.Errorf("%s: an unknown shape must be kept in Body", tt.body)
		}
	}
}

// What arrived of a cut login answer tells the lifetime of the session it
// opened only where expires_in arrived whole: every cut of the fixtures
// gives 0 or the full 86400 s, never a number the cut went through.
func TestSalvageLifetime(t *testing.T) {
	for _, f := range []string{"login-snake.json", "login-camel.json", "login-both.json"} {
		body := fixture(t, f)
		known := false
		for i := range len(body) + 1 {
			switch got := salvageLifetime(body[:i]); got {
			case 0:
			case 86400 * time.Second:
				known = true
			default:
				t.Fatalf("%s cut at %d (%q): lifetime %v", f, i, body[:i], got)
			}
		}
		if !known || salvageLifetime(body) != 86400*time.Second {
			t.Errorf("%s: the lifetime was never read", f)
		}
	}
	for _, b := range []string{`{"expires_in":"30",`, `{"token_type":{"x":[1]},"expires_in":30}`, `{"expiresIn": 30 ,"accessToken":"ab`} {
		if got := salvageLifetime([]byte(b)); got != 30*time.Second {
			t.Errorf("%s: %v, want 30s", b, got)
		}
	}
	for _, b := range []string{`{"expires_in":30`, `{"expires_in":-5,`, `{"expires_in":"soon",`, `["expires_in",30]`, `{"x":"expires_in","y":30,`, ``} {
		if got := salvageLifetime([]byte(b)); got != 0 {
			t.Errorf("%s: %v, want 0", b, got)
		}
	}
}
