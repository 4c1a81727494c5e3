package plenty

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrInvalidCredentials: the login was refused; retrying cannot help.
	ErrInvalidCredentials = errors.New("login refused: invalid credentials")
	// ErrSessionLimit: the system already has its maximum of concurrent
	// sessions (too_many_concurrent_sessions). Login is retried only after a
	// long backoff.
	ErrSessionLimit = errors.New("too many concurrent sessions")
	// ErrUnauthorized: the token was rejected (401) even after a fresh login.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrThrottled: the service answered 429 for a rate limit.
	ErrThrottled = errors.New("throttled")
	// ErrAnswerLost: a login or renewal request may have reached the
	// service, but its answer was lost (connection dropped or timed out
	// after the request was sent, a 2xx body cut short or unreadable, a
	// 5xx). A login may have opened a session the client cannot use.
	ErrAnswerLost = errors.New("answer lost after the request was sent")
)

// APIError is a non-2xx answer of the service, decoded from either error body
// shape: {"error":{"message":..,"code":..}} or {"error":"code","message":..}.
type APIError struct {
	Op          string        // what the client was doing ("login", "search orders")
	Status      int           // HTTP status
	Code        string        // the error code: the string form of "error", or the numeric "code"
	Message     string        // the server's message
	MaxSessions int           // max_current_sessions, on a session-limit error
	RetryAfter  time.Duration // from Retry-After or a -Calls-Reset header, on 429
	Body        string        // the start of the body when it was not a JSON error
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: HTTP %d", e.Op, e.Status)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	if e.Message == "" && e.Body != "" {
		fmt.Fprintf(&b, ": %q", e.Body)
	}
	return b.String()
}

// Is lets errors.Is match the sentinels by status and code.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrInvalidCredentials:
		return e.Code == "invalid_credentials"
	case ErrSessionLimit:
		return e.Code == "too_many_concurrent_sessions"
	case ErrThrottled:
		return e.Status == http.StatusTooManyRequests && e.Code != "too_many_concurrent_sessions"
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	}
	return false
}

// Retryable reports whether the same call may succeed later: 5xx, 429 and
// 408. 400, 401, 403, 404, 422 and the like are permanent for that call.
// A session-limit 429 is not: login waits a long backoff instead.
func (e *APIError) Retryable() bool {
	if e.Code == "too_many_concurrent_sessions" {
		return false
	}
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout
}

// errorBody is the union of the error body shapes seen on the service.
type errorBody struct {
	Error       json.RawMessage `json:"error"`
	Message     string          `json:"message"`
	MaxSessions int             `json:"max_current_sessions"`
}

type errorObject struct {
	Message string          `json:"message"`
	Code    json.RawMessage `json:"code"`
}

// DecodeErrorBody fills Code, Message and MaxSessions of e from a body of any
// known shape. It never fails: an unknown shape or a non-JSON body (an HTML
// error page) is kept, shortened, in Body.
func DecodeErrorBody(e *APIError, body []byte) {
	var eb errorBody
	if err := json.Unmarshal(body, &eb); err != nil {
		e.Body = excerpt(body)
		return
	}
	e.Message = eb.Message
	e.MaxSessions = eb.MaxSessions
	switch {
	case len(eb.Error) == 0 || string(eb.Error) == "null":
	case eb.Error[0] == '"':
		_ = json.Unmarshal(eb.Error, &e.Code)
	case eb.Error[0] == '{':
		var eo errorObject
		if json.Unmarshal(eb.Error, &eo) == nil {
			if eo.Message != "" {
				e.Message = eo.Message
			}
			e.Code = strings.Trim(string(eo.Code), `"`)
			if e.Code == "null" {
				e.Code = ""
			}
		}
	default:
		e.Code = oneLine(truncate(eb.Error, 60))
	}
	if e.Code == "" && e.Message == "" {
		e.Body = excerpt(body)
	}
}

// excerpt is the start of a body for an error message, on one line. Leading
// white space goes first: a page that starts with 200 blanks still says
// something.
func excerpt(body []byte) string {
	return oneLine(truncate(bytes.TrimSpace(body), 200))
}

// truncate cuts b to at most n bytes.
func truncate(b []byte, n int) []byte {
	return b[:min(len(b), n)]
}

func oneLine(b []byte) string {
	return strings.Join(strings.Fields(string(b)), " ")
}
