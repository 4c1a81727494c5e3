package plentysim

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// session is one login: it lives until expires and is renewed in place by
// a refresh (new tokens, same session).
type session struct {
	user    string
	access  string
	refresh string
	expires time.Time
	// rejectUntil: the tokens answer 401 before this, though the session
	// is live and counts against MaxSessions (see RejectNewTokens).
	rejectUntil time.Time
}

// Fixed response bodies (see the fixtures).
var (
	unauthenticatedBody    = []byte(`{"error":{"message":"Unauthenticated.","code":401}}`)
	invalidCredentialsBody = []byte(`{"error":"invalid_credentials","message":"The user credentials were incorrect."}`)
)

func sessionLimitBody(max int) []byte {
	n := strconv.Itoa(max)
	return []byte(`{"error":"too_many_concurrent_sessions","max_current_sessions":` + n +
		`,"message":"Too many users. Only ` + n + ` users can be logged in simultaneously. Please try again later."}`)
}

// maxBody bounds the request bodies the simulator reads.
const maxBody = 1 << 20

func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request, now time.Time) {
	form := readForm(r)
	user, pass := form.Get("username"), form.Get("password")
	key := user
	if key == "" {
		key = addrKey(r)
	}
	s.ctl.Lock()
	s.stats.LoginCalls++
	rej := s.admitLocked(w.Header(), r, key, 1, false, now)
	var (
		status int
		body   []byte
		lose   LoginFault
	)
	switch {
	case rej != nil:
		status, body = http.StatusTooManyRequests, rej.body
	case user != s.cfg.Username || pass != s.cfg.Password:
		s.stats.Unauthorized401++
		status, body = http.StatusUnauthorized, invalidCredentialsBody
	case s.liveCountLocked(now) >= s.cfg.MaxSessions:
		s.stats.SessionLimit429++
		status, body = http.StatusTooManyRequests, sessionLimitBody(s.cfg.MaxSessions)
	default:
		sess := &session{user: user, expires: now.Add(s.cfg.TokenTTL)}
		s.issueTokensLocked(sess, now)
		s.live[sess] = struct{}{}
		n := len(s.live)
		s.stats.MaxConcurrentSessions = max(s.stats.MaxConcurrentSessions, n)
		status, body = http.StatusOK, s.tokenBody(sess, n)
		if s.lostLogins.n > 0 {
			s.lostLogins.n--
			s.stats.FaultsInjected++
			lose = s.lostLogins.kind
		}
	}
	s.ctl.Unlock()
	switch lose {
	case LoginCut:
		writeJSON(w, http.StatusOK, body[:len(body)/2])
	case LoginDrop:
		dropConnection(w, body)
	case LoginHang:
		<-r.Context().Done() // the client gave up
	case LoginServerError:
		writeJSON(w, http.StatusInternalServerError, serverErrorBody)
	default:
		writeJSON(w, status, body)
	}
}

// LoginFault is a way the answer to a login gets lost after the service
// opened the session.
type LoginFault string

// Login faults.
const (
	LoginCut         LoginFault = "cut"  // 200 with the token body cut in the middle (Content-Length matching the cut)
	LoginDrop        LoginFault = "drop" // 200 announcing the whole body; half of it is sent, then the connection is closed
	LoginHang        LoginFault = "hang" // no answer until the client gives up (its timeout)
	LoginServerError LoginFault = "500"  // 500 with a JSON error body
)

// lostLogins is what FailLogins set.
type lostLogins struct {
	n    int
	kind LoginFault
}

// FailLogins makes the next n logins that open a session lose their answer
// the way kind says. The session is opened all the same: it counts against
// MaxSessions until it expires, as on a real system whose answer was lost on
// the way. n <= 0 ends it.
func (s *Server) FailLogins(n int, kind LoginFault) error {
	switch kind {
	case LoginCut, LoginDrop, LoginHang, LoginServerError:
	default:
		return fmt.Errorf("login fault %q: want cut, drop, hang or 500", kind)
	}
	s.ctl.Lock()
	defer s.ctl.Unlock()
	s.lostLogins = lostLogins{n: max(n, 0), kind: kind}
	return nil
}

func (s *Server) serveRefresh(w http.ResponseWriter, r *http.Request, now time.Time) {
	form := readForm(r)
	token := form.Get("refresh_token")
	if token == "" {
		token = form.Get("refreshToken")
	}
	s.ctl.Lock()
	s.stats.RefreshCalls++
	sess := s.refreshes[token]
	if sess != nil && !now.Before(sess.expires) {
		s.dropLocked(sess)
		sess = nil
	}
	key := addrKey(r)
	if sess != nil {
		key = sess.user
	}
	rej := s.admitLocked(w.Header(), r, key, 1, false, now)
	var (
		status int
		body   []byte
		lose   bool
	)
	switch {
	case rej != nil:
		status, body = http.StatusTooManyRequests, rej.body
	case sess == nil:
		s.stats.Unauthorized401++
		status, body = http.StatusUnauthorized, unauthenticatedBody
	default:
		delete(s.sessions, sess.access)
		delete(s.refreshes, sess.refresh)
		sess.expires = now.Add(s.cfg.TokenTTL)
		s.issueTokensLocked(sess, now)
		status, body = http.StatusOK, s.tokenBody(sess, len(s.live))
		if s.lostRefreshes > 0 {
			s.lostRefreshes--
			s.stats.FaultsInjected++
			lose = true
		}
	}
	s.ctl.Unlock()
	if lose {
		dropConnection(w, body)
		return
	}
	writeJSON(w, status, body)
}

// FailRefreshes makes the next n refreshes that renew a session lose their
// answer (half of it is sent, then the connection is closed). The session
// is renewed all the same: its old tokens answer 401, its new ones reach
// nobody, and it counts against MaxSessions until it expires. n <= 0 ends
// it.
func (s *Server) FailRefreshes(n int) {
	s.ctl.Lock()
	defer s.ctl.Unlock()
	s.lostRefreshes = max(n, 0)
}

// RejectNewTokens makes every token issued (by a login or a refresh) during
// the next d answer 401, as a service does whose nodes do not know a new
// token yet: until d has passed, or, with forever, until the session
// expires. The sessions themselves are open and count against MaxSessions
// until they expire. d <= 0 ends it for tokens issued from now on.
func (s *Server) RejectNewTokens(d time.Duration, forever bool) {
	now := s.cfg.Now()
	s.ctl.Lock()
	defer s.ctl.Unlock()
	s.rejectNew = rejectNew{until: now.Add(max(d, 0)), forever: forever}
}

// rejectNew is what RejectNewTokens set.
type rejectNew struct {
	until   time.Time
	forever bool
}

// readForm returns the parameters of a login or refresh request: a JSON
// object body, a form-encoded body, and the query string, in that order of
// precedence.
func readForm(r *http.Request) url.Values {
	vals := r.URL.Query()
	body, _ := io.ReadAll(io.LimitReader(r.Body, maxBody))
	body = bytes.TrimSpace(body)
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt == "application/x-www-form-urlencoded" || (len(body) > 0 && body[0] != '{') {
		if f, err := url.ParseQuery(string(body)); err == nil {
			for k, v := range f {
				vals[k] = v
			}
		}
		return vals
	}
	var obj map[string]any
	if json.Unmarshal(body, &obj) == nil {
		for k, v := range obj {
			switch v := v.(type) {
			case string:
				vals.Set(k, v)
			case float64:
				vals.Set(k, strconv.FormatFloat(v, 'f', -1, 64))
			}
		}
	}
	return vals
}

// issueTokensLocked gives the session a new access and refresh token.
func (s *Server) issueTokensLocked(sess *session, now time.Time) {
	sess.rejectUntil = time.Time{}
	if now.Before(s.rejectNew.until) {
		sess.rejectUntil = s.rejectNew.until
		if s.rejectNew.forever {
			sess.rejectUntil = sess.expires
		}
	}
	sess.access = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9." + randomToken(base64.RawURLEncoding.EncodeToString)
	sess.refresh = "def50200" + randomToken(hex.EncodeToString)
	s.sessions[sess.access] = sess
	s.refreshes[sess.refresh] = sess
}

func randomToken(encode func([]byte) string) string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails
	return encode(b[:])
}

// tokenBody renders the token response in the configured style.
func (s *Server) tokenBody(sess *session, liveSessions int) []byte {
	expires := strconv.FormatInt(int64(s.cfg.TokenTTL/time.Second), 10)
	var b []byte
	camel := func() {
		b = append(b, `"tokenType":"Bearer","expiresIn":`+expires+`,"accessToken":`...)
		b = appendJSONString(b, sess.access)
		b = append(b, `,"refreshToken":`...)
		b = appendJSONString(b, sess.refresh)
	}
	snake := func() {
		b = append(b, `"token_type":"Bearer","expires_in":`+expires+`,"access_token":`...)
		b = appendJSONString(b, sess.access)
		b = append(b, `,"refresh_token":`...)
		b = appendJSONString(b, sess.refresh)
	}
	b = append(b, '{')
	switch s.cfg.LoginStyle {
	case LoginCamel:
		camel()
	case LoginBoth:
		camel()
		b = append(b, ',')
		snake()
		b = append(b, `,"concurrent_sessions":`...)
		b = strconv.AppendInt(b, int64(liveSessions), 10)
		b = append(b, `,"max_current_sessions":`...)
		b = strconv.AppendInt(b, int64(s.cfg.MaxSessions), 10)
	default:
		snake()
	}
	return append(b, '}')
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// sessionLocked returns the live session of an access token, or nil.
func (s *Server) sessionLocked(token string, now time.Time) *session {
	sess := s.sessions[token]
	if sess == nil {
		return nil
	}
	if !now.Before(sess.expires) {
		s.dropLocked(sess)
		return nil
	}
	if now.Before(sess.rejectUntil) {
		return nil
	}
	return sess
}

func (s *Server) dropLocked(sess *session) {
	delete(s.sessions, sess.access)
	delete(s.refreshes, sess.refresh)
	delete(s.live, sess)
}

// liveCountLocked drops expired sessions and returns the number of live ones.
func (s *Server) liveCountLocked(now time.Time) int {
	for sess := range s.live {
		if !now.Before(sess.expires) {
			s.dropLocked(sess)
		}
	}
	return len(s.live)
}

// ExpireSessions ends every session now: their tokens answer 401 and their
// slots are free (for tests of re-login).
func (s *Server) ExpireSessions() {
	s.ctl.Lock()
	defer s.ctl.Unlock()
	for sess := range s.live {
		s.dropLocked(sess)
	}
}
