package plenty

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func addFixtures(f *testing.F, names ...string) {
	for _, n := range names {
		f.Add(fixture(f, n))
	}
}

func FuzzDecodeErrorBody(f *testing.F) {
	addFixtures(f, "error-401-login.json", "error-401-token.json", "error-403.json", "error-429-sessions.json", "error-429-throttle.json")
	f.Add([]byte("<html>502</html>"))
	f.Fuzz(func(t *testing.T, body []byte) {
		e := &APIError{Op: "fuzz", Status: 500}
		DecodeErrorBody(e, body)
		if e.Code == "" && e.Message == "" && e.Body == "" && len(strings.TrimSpace(string(body))) > 0 && !json.Valid(body) {
			t.Fatal("a non-JSON body must be kept in Body")
		}
		_ = e.Error()
	})
}

func FuzzDecodeToken(f *testing.F) {
	addFixtures(f, "login-snake.json", "login-camel.json", "login-both.json")
	now := time.Unix(1795338161, 0)
	f.Fuzz(func(t *testing.T, body []byte) {
		tok, err := DecodeToken(body, now)
		if err != nil {
			if strings.Contains(err.Error(), "access") && tok.AccessToken != "" {
				t.Fatal("token returned with an error")
			}
			return
		}
		if tok.AccessToken == "" || !tok.ExpiresAt.After(now) {
			t.Fatalf("accepted an unusable token: %+v", tok)
		}
	})
}

func FuzzParseThrottle(f *testing.F) {
	f.Add("166000", "151433", "29770", "200", "187", "14", "8", "1795338184", "Sun, 22 Nov 2026 09:02:50 GMT")
	f.Add("", "", "", "x", "-1", "1e9", "soon", "99999999999999", "")
	f.Fuzz(func(t *testing.T, ll, lc, ld, sl, sc, sd, retry, reset, date string) {
		h := http.Header{}
		set := func(k, v string) {
			if v != "" {
				h[k] = []string{v}
			}
		}
		set("X-Plenty-Global-Long-Period-Limit", ll)
		set("X-Plenty-Global-Long-Period-Calls-Left", lc)
		set("X-Plenty-Global-Long-Period-Decay", ld)
		set("X-Plenty-Global-Short-Period-Limit", sl)
		set("X-Plenty-Global-Short-Period-Calls-Left", sc)
		set("X-Plenty-Global-Short-Period-Decay", sd)
		set("X-Plenty-Global-Short-Period-Calls-Reset", reset)
		set("Retry-After", retry)
		set("Date", date)
		now := time.Unix(1795338170, 0)
		th := ParseThrottle(h, now)
		for _, p := range []Period{th.Long, th.Short} {
			if p.Limit < 0 || p.CallsLeft < -1 || p.Decay < 0 {
				t.Fatalf("negative figures: %+v", p)
			}
		}
		if th.RetryAfter < 0 {
			t.Fatal("negative Retry-After")
		}
		// Whatever the headers say, a pacer fed with them waits at least a
		// second, and no longer than the longest wait the headers can name
		// (Retry-After below 1e7 s, a reset time before 1e11 unix seconds).
		clk := &fakeClock{now: now}
		p := NewPacer(PacerConfig{Now: clk.Now, Sleep: clk.Sleep})
		p.Observe(http.StatusTooManyRequests, th)
		if nb := p.NotBefore(); nb.Before(now.Add(time.Second)) || nb.After(time.Unix(1e11, 0).Add(time.Second)) {
			t.Fatalf("after a 429 the pacer must block at least 1s and at most what the headers name, got until %v", nb.Sub(now))
		}
	})
}

// FuzzSalvageLifetime: what a cut login answer says of its session's
// lifetime never shrinks as more of the answer arrives (a cut never
// shortens it), and it is what DecodeToken reads from a whole answer or
// longer.
func FuzzSalvageLifetime(f *testing.F) {
	addFixtures(f, "login-snake.json", "login-camel.json", "login-both.json")
	f.Add([]byte(`{"expires_in":"30",`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 300 {
			return
		}
		var prev time.Duration
		for i := range len(body) + 1 {
			got := salvageLifetime(body[:i])
			if got < prev || got > 10*365*24*time.Hour {
				t.Fatalf("cut at %d: lifetime %v after %v at a shorter cut", i, got, prev)
			}
			prev = got
		}
		if tok, err := DecodeToken(body, time.Unix(0, 0)); err == nil && prev != 0 && prev < tok.ExpiresAt.Sub(time.Unix(0, 0)) {
			t.Fatalf("salvaged %v from a whole answer that says %v", prev, tok.ExpiresAt.Sub(time.Unix(0, 0)))
		}
	})
}
