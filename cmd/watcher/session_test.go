package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/state"
)

// sessionEnv is a simulated shop over real HTTP, an in-process NATS server
// with JetStream and the watcher's environment (the default configuration
// and the service's default limits: 3 sessions, 200 calls per short period).
type sessionEnv struct {
	sim       *plentysim.Server
	statePath string
	httpAddr  string
}

func newSessionEnv(t *testing.T) *sessionEnv {
	t.Helper()
	sim := plentysim.New(plentysim.Config{Seed: 7})
	sim.Generate(200, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Minute))
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	ns := testnats.Start(t)
	e := &sessionEnv{sim: sim, statePath: filepath.Join(t.TempDir(), "state.db"), httpAddr: e2e.FreeAddr(t)}
	unsetWatcherEnv(t)
	for k, v := range map[string]string{
		"WATCHER_PLENTY_URL": srv.URL, "WATCHER_PLENTY_USERNAME": "demo", "WATCHER_PLENTY_PASSWORD": "demo",
		"WATCHER_NATS_URL": ns.ClientURL(), "WATCHER_STATE_PATH": e.statePath, "WATCHER_HTTP_ADDR": e.httpAddr,
	} {
		t.Setenv(k, v)
	}
	return e
}

// unsetWatcherEnv removes the WATCHER_ variables of the process environment
// for the test (restored after it): they must not leak into its configuration.
func unsetWatcherEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "WATCHER_") {
			t.Setenv(k, v) // restores it after the test
			os.Unsetenv(k)
		}
	}
}

func (e *sessionEnv) check(t *testing.T) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runCheck(t.Context(), nil, &out, &errOut)
	return code, out.String() + errOut.String()
}

func (e *sessionEnv) state(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runState(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// startDaemon runs `watcher run` in this process until the test ends or
// stop is called (its log kept: startDaemonLogged).
func (e *sessionEnv) startDaemon(t *testing.T) (stop func()) {
	t.Helper()
	_, stop = e.startDaemonLogged(t)
	return stop
}

// TestCheckSessionReuse: `watcher check` keeps the session it opens in the
// state file and `watcher run` reuses it (one login in all); `check` while a
// watcher holds the file asks that watcher over HTTP and logs in zero times.
// Also: check does not contradict itself about creating the stream.
func TestCheckSessionReuse(t *testing.T) {
	e := newSessionEnv(t)

	code, out := e.check(t)
	if code != exitOK || !strings.Contains(out, "logged in") || !strings.Contains(out, "kept in the state file") {
		t.Fatalf("first check: exit %d\n%s", code, out)
	}
	if strings.Contains(out, "creating it is disabled") || !strings.Contains(out, "creates it at start") {
		t.Errorf("check on a missing stream with WATCHER_STREAM_CREATE=true must say the watcher creates it, and nothing else:\n%s", out)
	}
	if n := e.sim.Stats().LoginCalls; n != 1 {
		t.Fatalf("%d logins after the first check, want 1", n)
	}

	// A second check reuses the stored session; with stream creation off it
	// fails on the missing stream, naming the way out.
	t.Setenv("WATCHER_STREAM_CREATE", "false")
	code, out = e.check(t)
	if code != exitFail || !strings.Contains(out, "reused it, no login") || !strings.Contains(out, "FAIL stream ORDERS") {
		t.Errorf("second check (stream creation off): exit %d\n%s", code, out)
	}
	t.Setenv("WATCHER_STREAM_CREATE", "true")
	token := storedAccessToken(t, e.statePath)

	// `watcher run` reuses the session check opened.
	e.startDaemon(t)
	base := "http://" + e.httpAddr
	// Ready with "ok" once a sweep is verified ("first sync in progress" before).
	e2e.WaitFor(t, "the first sweep", 60*time.Second, func() bool {
		code, body := e2e.Get(base + "/readyz")
		return code == 200 && strings.TrimSpace(body) == "ok"
	})
	if n := e.sim.Stats().LoginCalls; n != 1 {
		t.Errorf("%d logins after check then run on one state file, want 1", n)
	}

	// check while the watcher runs: no login, the watcher's own answer.
	code, out = e.check(t)
	if code != exitOK || !strings.Contains(out, "a watcher is running") || !strings.Contains(out, "running watcher ready") ||
		!strings.Contains(out, "200 orders tracked") {
		t.Errorf("check while a watcher runs: exit %d\n%s", code, out)
	}
	if n := e.sim.Stats().LoginCalls; n != 1 {
		t.Errorf("%d logins after a check while the watcher runs, want 1 (the check must open no session)", n)
	}
	if strings.Contains(out, token) {
		t.Error("check printed the session token")
	}
}

// storedAccessToken reads the session token of a state file nobody holds.
func storedAccessToken(t *testing.T, path string) string {
	t.Helper()
	s, err := state.Open(path, state.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tok, err := s.LoadToken(t.Context())
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("no stored token: %v", err)
	}
	return tok.AccessToken
}

// TestStateLive: the HTTP port serves the state report and one order's
// tracked state as JSON, never the token; `watcher state [ORDER_ID]` shows
// them from the running watcher while it holds the file, and its listing
// (-status) from the running watcher and from the file once it stopped.
func TestStateLive(t *testing.T) {
	e := newSessionEnv(t)
	if code, out := e.check(t); code != exitOK { // stores a session (and its token) in the file
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	token := storedAccessToken(t, e.statePath)
	stop := e.startDaemon(t)
	base := "http://" + e.httpAddr
	// Ready with "ok" once a sweep is verified ("first sync in progress" before).
	e2e.WaitFor(t, "the first sweep", 60*time.Second, func() bool {
		code, body := e2e.Get(base + "/readyz")
		return code == 200 && strings.TrimSpace(body) == "ok"
	})
	order := e.sim.Orders()[3]

	code, body := e2e.Get(base + "/state")
	var rep pipeline.Report
	if code != 200 || json.Unmarshal([]byte(body), &rep) != nil {
		t.Fatalf("GET /state = %d %s", code, body)
	}
	if rep.OrdersTracked != 200 || rep.OutboxDepth != 0 || rep.Watermark.IsZero() || rep.Baseline.IsZero() || rep.LastSweep.IsZero() ||
		!rep.FirstSync.Done || rep.FirstSync.Progress != 1 || rep.FileSizeBytes <= 0 || rep.StateFile != e.statePath || rep.SchemaVersion != state.SchemaVersion {
		t.Errorf("GET /state = %+v", rep)
	}
	code, orderBody := e2e.Get(fmt.Sprintf("%s/state/orders/%d", base, order.ID))
	var o struct {
		OrderID int64 `json:"orderId"`
		State   struct {
			StatusID  json.Number `json:"statusId"`
			UpdatedAt string      `json:"updatedAt"`
		} `json:"state"`
	}
	if code != 200 || json.Unmarshal([]byte(orderBody), &o) != nil || o.OrderID != order.ID || o.State.StatusID.String() != order.StatusID || o.State.UpdatedAt == "" {
		t.Errorf("GET /state/orders/%d = %d %s; the shop has status %s", order.ID, code, orderBody, order.StatusID)
	}
	if code, body := e2e.Get(base + "/state/orders/999999999"); code != 404 || !strings.Contains(body, "not tracked") {
		t.Errorf("GET of an unknown order = %d %s, want 404", code, body)
	}
	if code, _ := e2e.Get(base + "/state/orders/x"); code != 400 {
		t.Errorf("GET of a bad order id = %d, want 400", code)
	}
	if strings.Contains(body, token) || strings.Contains(orderBody, token) {
		t.Error("the HTTP state shows the session token")
	}
	if _, metrics := e2e.Get(base + "/metrics"); !strings.Contains(metrics, "orderwatch_build_info{") {
		t.Error("/metrics lacks orderwatch_build_info")
	}

	// The watcher holds the file: `watcher state` asks it.
	code, out, errOut := e.state(t)
	if code != exitOK || !strings.Contains(out, "orders         200") || !strings.Contains(out, "first sync     done") {
		t.Errorf("watcher state while the watcher runs: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = e.state(t, fmt.Sprint(order.ID))
	if code != exitOK || !strings.Contains(out, fmt.Sprintf(`"orderId": %d`, order.ID)) {
		t.Errorf("watcher state %d while the watcher runs: exit %d\n%s%s", order.ID, code, out, errOut)
	}
	if code, _, errOut := e.state(t, "999999999"); code != exitFail || !strings.Contains(errOut, "not tracked") {
		t.Errorf("watcher state of an unknown order: exit %d %s", code, errOut)
	}
	// A listing of the orders in that order's status, from the running
	// watcher (GET /state/orders).
	code, out, errOut = e.state(t, "-status", order.StatusID, "-limit", "10000")
	if !listed(t, code, out, order.ID) {
		t.Errorf("watcher state -status %s while the watcher runs: exit %d, order %d not listed\n%s%s", order.StatusID, code, order.ID, out, errOut)
	}
	for _, args := range [][]string{{"-status", "x"}, {"-status", order.StatusID, "42"}, {"-limit", "0"}} {
		if code, _, _ := e.state(t, args...); code != exitConfig {
			t.Errorf("watcher state %v: exit %d, want %d", args, code, exitConfig)
		}
	}
	t.Setenv("WATCHER_HTTP_ADDR", e2e.FreeAddr(t))
	if code, _, errOut := e.state(t); code != exitFail || !strings.Contains(errOut, "WATCHER_HTTP_ADDR") {
		t.Errorf("watcher state with a wrong address: exit %d %s, want a line naming WATCHER_HTTP_ADDR", code, errOut)
	}
	t.Setenv("WATCHER_HTTP_ADDR", e.httpAddr)
	if code, out, _ := e.state(t, "-json"); code != exitOK || strings.Contains(out, token) || !strings.Contains(out, `"ordersTracked": 200`) {
		t.Errorf("watcher state -json: exit %d\n%s", code, out)
	}

	// Once the watcher stopped, the listing comes from the file.
	stop()
	code, out, errOut = e.state(t, "-status", order.StatusID, "-limit", "10000")
	if !listed(t, code, out, order.ID) {
		t.Errorf("watcher state -status %s from the file: exit %d, order %d not listed\n%s%s", order.StatusID, code, order.ID, out, errOut)
	}
}

// listed says whether a `watcher state` listing (exit code, output) ended
// well and holds order id.
func listed(t *testing.T, code int, out string, id int64) bool {
	t.Helper()
	var list struct {
		Orders []struct {
			OrderID     int64  `json:"orderId"`
			StatusSince string `json:"statusSince"`
		} `json:"orders"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &list) != nil {
		return false
	}
	for _, o := range list.Orders {
		if o.OrderID == id && o.StatusSince != "" {
			return true
		}
	}
	return false
}

// TestStateOffline: `watcher state` reads a file no watcher holds, and names
// WATCHER_STATE_PATH when there is none.
func TestStateOffline(t *testing.T) {
	e := newSessionEnv(t)
	if code, out := e.check(t); code != exitOK {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	code, out, errOut := e.state(t)
	if code != exitOK || !strings.Contains(out, "orders         0") || !strings.Contains(out, "watermark      never") || !strings.Contains(out, "first sync     not started") {
		t.Errorf("watcher state of a fresh file: exit %d\n%s%s", code, out, errOut)
	}
	t.Setenv("WATCHER_STATE_PATH", filepath.Join(t.TempDir(), "none.db"))
	if code, _, errOut := e.state(t); code != exitFail || !strings.Contains(errOut, "WATCHER_STATE_PATH") {
		t.Errorf("watcher state without a file: exit %d %q, want a line naming WATCHER_STATE_PATH", code, errOut)
	}
	if code, _, _ := e.state(t, "abc"); code != exitConfig {
		t.Errorf("watcher state abc: exit %d, want %d", code, exitConfig)
	}
}

// TestDefaultStatePathOutsideContainer: where the default state directory
// does not exist, check and run say to set WATCHER_STATE_PATH, and check
// logs in zero times (no place to keep the session).
func TestDefaultStatePathOutsideContainer(t *testing.T) {
	e := newSessionEnv(t)
	t.Setenv("WATCHER_STATE_PATH", filepath.Join(t.TempDir(), "missing-dir", "state.db"))
	code, out := e.check(t)
	if code != exitFail || !strings.Contains(out, "FAIL state file") || !strings.Contains(out, "WATCHER_STATE_PATH") {
		t.Errorf("check without a state directory: exit %d\n%s", code, out)
	}
	if n := e.sim.Stats().LoginCalls; n != 0 {
		t.Errorf("check logged in %d times with no state file to keep the session", n)
	}
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newDaemon(cfg, newLogger(io.Discard, "json", "error")); err == nil || !strings.Contains(err.Error(), "WATCHER_STATE_PATH") {
		t.Errorf("run without a state directory: %v, want an error naming WATCHER_STATE_PATH", err)
	}
}
