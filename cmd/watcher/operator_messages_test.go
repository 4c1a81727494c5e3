package main

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/state"
)

// TestUnknownVarsNameTheClosest: a WATCHER_* variable the configuration
// does not read is reported with the known variable closest to it; known
// variables and other prefixes are not.
func TestUnknownVarsNameTheClosest(t *testing.T) {
	got := unknownVars([]string{
		"WATCHER_POLL_INTERVALL=5s", "WATCHER_POLL_INTERVAL=1s", "WATCHER_NATSURL=nats://x",
		"WATCHER_PLENTY_PASWORD=secret", "HOME=/root", "WATCHERX=1",
	})
	want := []unknownVar{
		{"WATCHER_NATSURL", "WATCHER_NATS_URL"},
		{"WATCHER_PLENTY_PASWORD", "WATCHER_PLENTY_PASSWORD"},
		{"WATCHER_POLL_INTERVALL", "WATCHER_POLL_INTERVAL"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("unknownVars: %v, want %v", got, want)
	}
	for _, name := range knownVars() {
		if u := unknownVars([]string{name + "=1"}); len(u) != 0 {
			t.Errorf("%s reported unknown: %v", name, u)
		}
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d, want 3", d)
	}
}

// TestUnknownVarsWarnedAtStart: `watcher run` and `watcher check` say, one
// line each, which variables they ignore and what was probably meant; the
// line never shows the value (it may be a secret). Here the typo leaves a
// required variable unset, so the warning is what explains the error.
func TestUnknownVarsWarnedAtStart(t *testing.T) {
	setBase(t)
	os.Unsetenv("WATCHER_PLENTY_PASSWORD")
	t.Setenv("WATCHER_PLENTY_PASWORD", "s3cret-value")
	t.Setenv("WATCHER_POLL_INTERVALL", "5s")
	t.Setenv("WATCHER_STATE_PATH", filepath.Join(t.TempDir(), "state.db"))

	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"run"}, &out, &errOut); code != exitConfig {
		t.Errorf("run: exit %d, want %d\n%s", code, exitConfig, errOut.String())
	}
	for _, want := range []string{
		"WATCHER_PLENTY_PASWORD is not a variable the watcher knows (ignored); the closest known one is WATCHER_PLENTY_PASSWORD",
		"WATCHER_POLL_INTERVALL is not a variable the watcher knows (ignored); the closest known one is WATCHER_POLL_INTERVAL",
		"WATCHER_PLENTY_PASSWORD (or WATCHER_PLENTY_PASSWORD_FILE) is required",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("run: no %q in\n%s", want, errOut.String())
		}
	}
	out.Reset()
	if code := run(t.Context(), []string{"check"}, &out, &errOut); code != exitConfig ||
		!strings.Contains(out.String(), "WARN WATCHER_POLL_INTERVALL is not a variable the watcher knows (ignored); the closest known one is WATCHER_POLL_INTERVAL") {
		t.Errorf("check: exit %d\n%s", code, out.String())
	}
	if strings.Contains(out.String()+errOut.String(), "s3cret-value") {
		t.Error("a warning showed a variable's value")
	}

	// With the configuration complete, the daemon logs the warning as a
	// structured line (it stops at once on the taken HTTP address).
	t.Setenv("WATCHER_PLENTY_PASSWORD", "secret")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("WATCHER_HTTP_ADDR", ln.Addr().String())
	t.Setenv("WATCHER_NATS_URL", "nats://"+closedAddr(t))
	logs := &e2e.LockedBuffer{} // NATS callbacks may still log after run returns
	run(t.Context(), []string{"run"}, &out, logs)
	if !strings.Contains(logs.String(), `"msg":"unknown configuration variable ignored","var":"WATCHER_POLL_INTERVALL","closest_known":"WATCHER_POLL_INTERVAL"`) {
		t.Errorf("run's log lacks the warning:\n%s", logs.String())
	}
}

// TestSubcommandHelp: -h and --help of every command print its help on
// stdout and exit 0 without running it: no state file is created, no call
// reaches the service. An argument a command does not take exits 2.
func TestSubcommandHelp(t *testing.T) {
	sim := plentysim.New(plentysim.Config{Seed: 1})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	setBase(t)
	statePath := filepath.Join(t.TempDir(), "state.db")
	t.Setenv("WATCHER_PLENTY_URL", srv.URL)
	t.Setenv("WATCHER_STATE_PATH", statePath)
	t.Setenv("WATCHER_NATS_URL", "nats://"+closedAddr(t))
	t.Setenv("WATCHER_HTTP_ADDR", "127.0.0.1:0")

	for _, cmd := range []string{"run", "check", "state", "demo", "reset", "rescan"} {
		for _, flag := range []string{"-h", "--help"} {
			var out, errOut bytes.Buffer
			code := run(t.Context(), []string{cmd, flag}, &out, &errOut)
			if code != exitOK || !strings.HasPrefix(out.String(), "usage: watcher "+cmd) || errOut.Len() != 0 {
				t.Errorf("watcher %s %s: exit %d\nstdout:\n%s\nstderr:\n%s", cmd, flag, code, out.String(), errOut.String())
			}
			if cmd == "state" && !strings.Contains(out.String(), "-json") || cmd == "demo" && !strings.Contains(out.String(), "-rate") ||
				cmd == "rescan" && (!strings.Contains(out.String(), "-from") || !strings.Contains(out.String(), "Asks the active replica")) {
				t.Errorf("watcher %s %s does not list its flags:\n%s", cmd, flag, out.String())
			}
		}
	}
	if _, err := os.Stat(statePath); !os.IsNotExist(err) {
		t.Errorf("a help run touched the state file: %v", err)
	}
	if n := sim.Stats().Calls; n != 0 {
		t.Errorf("help runs made %d calls to the service", n)
	}
	for _, args := range [][]string{{"run", "now"}, {"check", "-x"}, {"state", "1", "2"}} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), args, &out, &errOut); code != exitConfig || !strings.Contains(errOut.String(), "usage: watcher "+args[0]) {
			t.Errorf("watcher %v: exit %d, want %d with the usage\n%s", args, code, exitConfig, errOut.String())
		}
	}
}

// TestConfigErrorNamesVariableOnce: a value that does not parse is reported
// under its own name, by run and by state (which reads the configuration
// without checking it), not as WATCHER_WATCHER_....
func TestConfigErrorNamesVariableOnce(t *testing.T) {
	setBase(t)
	t.Setenv("WATCHER_POLL_INTERVAL", "soon")
	_, err := LoadConfig()
	if err == nil || !strings.HasPrefix(err.Error(), `WATCHER_POLL_INTERVAL="soon": `) {
		t.Errorf("LoadConfig: %v", err)
	}
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"state"}, &out, &errOut); code != exitConfig ||
		!strings.Contains(errOut.String(), `WATCHER_POLL_INTERVAL="soon"`) || strings.Contains(errOut.String(), "WATCHER_WATCHER_") {
		t.Errorf("state: exit %d\n%s", code, errOut.String())
	}
}

// TestBadHTTPAddrExits2: a malformed WATCHER_HTTP_ADDR, and one whose port
// another program holds, are configuration errors (exit 2) naming the
// variable, like every other.
func TestBadHTTPAddrExits2(t *testing.T) {
	setBase(t)
	t.Setenv("WATCHER_STATE_PATH", filepath.Join(t.TempDir(), "state.db"))
	t.Setenv("WATCHER_NATS_URL", "nats://"+closedAddr(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	for _, addr := range []string{"9090", "localhost:http-alt-nonsense", "127.0.0.1:99999", ln.Addr().String()} {
		t.Setenv("WATCHER_HTTP_ADDR", addr)
		var out bytes.Buffer
		errOut := &e2e.LockedBuffer{} // NATS callbacks may still log after run returns
		if code := run(t.Context(), []string{"run"}, &out, errOut); code != exitConfig || !strings.Contains(errOut.String(), "WATCHER_HTTP_ADDR") {
			t.Errorf("WATCHER_HTTP_ADDR=%s: exit %d, want %d naming the variable\n%s", addr, code, exitConfig, errOut.String())
		}
	}
}

// TestCheckWrongPassword, against the simulator over HTTP: with a live
// session in the state file, check does not try the password (the service
// checks one only by opening a session) and says so, exit 0; with an empty
// state file the wrong password is tried, refused, and check fails. A NATS
// server that cannot be reached is named (credentials redacted) with the
// cause.
func TestCheckWrongPassword(t *testing.T) {
	e := newSessionEnv(t)
	if code, out := e.check(t); code != exitOK {
		t.Fatalf("first check: exit %d\n%s", code, out)
	}
	t.Setenv("WATCHER_PLENTY_PASSWORD", "wrong")
	code, out := e.check(t)
	if code != exitOK || !strings.Contains(out, "WARN password not tried: the stored session") || !strings.Contains(out, "check passed") {
		t.Errorf("check with a stored session and a wrong password: exit %d, want 0 with the warning\n%s", code, out)
	}
	if n := e.sim.Stats().LoginCalls; n != 1 {
		t.Errorf("%d logins, want 1 (the stored session is reused)", n)
	}
	t.Logf("check with a stored session and a wrong password:\n%s", out)

	t.Setenv("WATCHER_STATE_PATH", filepath.Join(t.TempDir(), "empty.db"))
	dead := closedAddr(t)
	t.Setenv("WATCHER_NATS_URL", "nats://orderwatch:natspass@"+dead)
	code, out = e.check(t)
	if code != exitFail || !strings.Contains(out, "FAIL login") || !strings.Contains(out, "invalid_credentials") || strings.Contains(out, "password not tried") {
		t.Errorf("check with an empty state file and a wrong password: exit %d, want 1 with the refused login\n%s", code, out)
	}
	if !strings.Contains(out, "FAIL cannot reach NATS at nats://redacted@"+dead+": connection refused: ") {
		t.Errorf("the NATS failure does not name the URL and the cause:\n%s", out)
	}
	if strings.Contains(out, "natspass") {
		t.Error("check printed the NATS password")
	}
	t.Logf("check with a wrong password and NATS down:\n%s", out)
}

// TestReadyzLoginRefused: with a wrong password the daemon holds logins
// back, and /readyz says until when and why.
func TestReadyzLoginRefused(t *testing.T) {
	e := newSessionEnv(t)
	t.Setenv("WATCHER_PLENTY_PASSWORD", "wrong")
	e.startDaemon(t)
	var body string
	e2e.WaitFor(t, "/readyz to name the refused login", 30*time.Second, func() bool {
		var code int
		code, body = e2e.Get("http://" + e.httpAddr + "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "login refused until ")
	})
	if !strings.Contains(body, "invalid_credentials") {
		t.Errorf("/readyz does not give the reason: %q", body)
	}
	// The end of the hold: the client's 5-minute login backoff from now.
	_, rest, _ := strings.Cut(body, "login refused until ")
	until, err := time.Parse(time.RFC3339, strings.Fields(rest)[0])
	if err != nil || time.Until(until) <= 0 || time.Until(until) > 5*time.Minute+time.Second {
		t.Errorf("/readyz %q: the hold's end %v (%v) is not within the next 5 minutes", body, until, err)
	}
}

// TestStateFileAdvice: when the state file cannot be opened for writing,
// the advice says what an existing file holds and that another
// WATCHER_STATE_PATH starts a new first sync; for a missing directory it
// names the variable.
func TestStateFileAdvice(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := state.Open(path, state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	msg := pipeline.StateOpenError(path, fmt.Errorf("open %s: %w", path, fs.ErrPermission)).Error()
	for _, want := range []string{"exists and holds this watcher's progress (watermark none yet, 0 orders tracked, 0 events not yet published, the session)",
		"make it writable", "new first sync", "WATCHER_STATE_PATH"} {
		if !strings.Contains(msg, want) {
			t.Errorf("no %q in %q", want, msg)
		}
	}
	missing := filepath.Join(t.TempDir(), "no-such-dir", "state.db")
	msg = pipeline.StateOpenError(missing, fmt.Errorf("open %s: %w", missing, fs.ErrNotExist)).Error()
	if !strings.Contains(msg, "set WATCHER_STATE_PATH to a file in a writable directory") || strings.Contains(msg, "holds") {
		t.Errorf("missing directory: %q", msg)
	}
}

// TestCallShareInertWarned: against a service whose answers carry no
// long-period throttle headers (the simulator behind a handler that strips
// them), the daemon warns once, after the first sweep, that
// WATCHER_CALL_SHARE has no effect; with the headers it does not.
func TestCallShareInertWarned(t *testing.T) {
	for _, strip := range []bool{true, false} {
		t.Run(fmt.Sprintf("strip=%v", strip), func(t *testing.T) {
			e := newSessionEnv(t)
			if strip {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					e.sim.ServeHTTP(&stripLong{ResponseWriter: w}, r)
				}))
				t.Cleanup(srv.Close)
				t.Setenv("WATCHER_PLENTY_URL", srv.URL)
			}
			t.Setenv("WATCHER_POLL_INTERVAL", "200ms")
			logs, _ := e.startDaemonLogged(t)
			e2e.WaitFor(t, "three sweeps", 30*time.Second, func() bool { return strings.Count(logs.String(), `"msg":"sweep"`) >= 3 })
			n := strings.Count(logs.String(), "WATCHER_CALL_SHARE has no effect")
			if strip && n != 1 || !strip && n != 0 {
				t.Errorf("%d CALL_SHARE warnings, want %d:\n%s", n, map[bool]int{true: 1}[strip], logs.String())
			}
		})
	}
}

// stripLong drops the long-period throttle headers from an answer.
type stripLong struct {
	http.ResponseWriter
	wrote bool
}

func (s *stripLong) WriteHeader(code int) {
	if s.wrote {
		return
	}
	s.wrote = true
	for k := range s.Header() {
		if strings.HasPrefix(k, plenty.PrefixLong) {
			s.Header().Del(k)
		}
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *stripLong) Write(b []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return s.ResponseWriter.Write(b)
}

// startDaemonLogged runs `watcher run` in this process until the test
// ends, and returns its JSON log.
func (e *sessionEnv) startDaemonLogged(t *testing.T) (*e2e.LockedBuffer, func()) {
	t.Helper()
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	logs := &e2e.LockedBuffer{}
	d, err := newDaemon(cfg, newLogger(logs, "json", "info"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("daemon: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return logs, stop
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestDemoSaysItIgnoresEnv: the demo configures itself; WATCHER_* variables
// in the environment are named as ignored, not silently dropped.
func TestDemoSaysItIgnoresEnv(t *testing.T) {
	unsetWatcherEnv(t)
	t.Setenv("WATCHER_POLL_INTERVAL", "5s")
	out, errOut := &e2e.LockedBuffer{}, &e2e.LockedBuffer{}
	if code := run(t.Context(), []string{"demo", "-for", "1s", "-orders", "10"}, out, errOut); code != exitOK {
		t.Fatalf("demo: exit %d\n%s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "demo: the demo configures itself and ignores WATCHER_POLL_INTERVAL") {
		t.Errorf("the demo does not say it ignores WATCHER_POLL_INTERVAL:\n%s", errOut.String())
	}
}
