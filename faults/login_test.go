package faults

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
)

// The first three login answers are lost after the service opened the
// session (a 200 whose body stops in the middle: the connection drops), the
// shop allows 3 sessions and they live 30 s. The real binary, in its
// default configuration apart from the fault suite's short poll interval,
// must never run into the session limit, log in at most 5 times, and
// deliver every change once a login works. Real time throughout: about a
// minute, as the third login has to wait until the first lost session has
// ended (30 s).
func TestFaultLostLoginAnswers(t *testing.T) {
	f := newFaultEnv(t, plentysim.Config{TokenTTL: 30 * time.Second, MaxSessions: 3})
	if err := f.sim.FailLogins(3, plentysim.LoginDrop); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	f.start()
	f.mutate(10)
	waitFor(t, "the watcher to log in and sweep", 3*time.Minute, func() bool {
		code, _ := get("http://" + f.addr + "/readyz")
		return code == 200
	})
	ready := time.Since(start)
	time.Sleep(2 * time.Second) // changes after the login flow too
	f.quiesce()
	n := f.check()
	st := f.sim.Stats()
	if st.SessionLimit429 != 0 || st.LoginCalls > 5 || st.MaxConcurrentSessions >= 3 {
		t.Errorf("%d session-limit 429s, %d logins, at most %d sessions at once: want 0, at most 5, fewer than the shop's 3",
			st.SessionLimit429, st.LoginCalls, st.MaxConcurrentSessions)
	}
	_, m := get("http://" + f.addr + "/metrics")
	if amb, ok := metricValue(m, `orderwatch_logins_total{result="ambiguous"}`), metricValue(m, `orderwatch_logins_total{result="ok"}`); amb != 3 || ok < 1 {
		t.Errorf("orderwatch_logins_total: ambiguous %v, ok %v; want 3 and at least 1", amb, ok)
	}
	if n == 0 {
		t.Error("no event reached the stream")
	}
	t.Logf("3 lost login answers: ready after %v, %d logins (at %s), at most %d sessions at once, 0 session-limit 429s, %d events checked",
		ready.Round(time.Second), st.LoginCalls, f.loginTimes(start), st.MaxConcurrentSessions, n)
}

// loginTimes lists when the watcher's logins ended, from its log.
func (f *faultEnv) loginTimes(start time.Time) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var at []string
	for _, line := range strings.Split(f.logs.String(), "\n") {
		var l struct {
			Time time.Time `json:"time"`
			Msg  string    `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && (l.Msg == "logged in" || strings.HasPrefix(l.Msg, "login answer lost")) {
			at = append(at, fmt.Sprintf("%.0fs", l.Time.Sub(start).Seconds()))
		}
	}
	return strings.Join(at, ", ")
}
