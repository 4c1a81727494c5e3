package main

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/orderwatch/orderwatch/plentysim"
)

// TestCheckWithoutStateFile: the documented way to try the password, an
// empty WATCHER_STATE_PATH with `watcher check`, logs in and searches with
// the session kept in memory, and says so.
func TestCheckWithoutStateFile(t *testing.T) {
	shopURL, _ := noStateCheckEnv(t)
	var out, errOut bytes.Buffer
	run(t.Context(), []string{"check"}, &out, &errOut)
	for _, want := range []string{"ok   no state file (WATCHER_STATE_PATH is empty)", "ok   logged in to " + shopURL, "ok   order search:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check without a state file lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "FAIL state file") {
		t.Errorf("check without a state file fails on it:\n%s", out.String())
	}
	// The login line says where the session went: memory, not a file.
	if strings.Contains(out.String(), "kept in the state file") {
		t.Errorf("check without a state file says the session is kept in the state file:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "the session is kept in memory only") {
		t.Errorf("check without a state file does not say the session is kept in memory only:\n%s", out.String())
	}
}

// noStateCheckEnv configures check for the simulator over HTTP (the
// right credentials), no state file, and NATS at natsAddr, where nothing
// listens.
func noStateCheckEnv(t *testing.T) (shopURL, natsAddr string) {
	t.Helper()
	srv := httptest.NewServer(plentysim.New(plentysim.Config{Seed: 1}))
	t.Cleanup(srv.Close)
	setBase(t)
	natsAddr = closedAddr(t)
	t.Setenv("WATCHER_PLENTY_URL", srv.URL)
	t.Setenv("WATCHER_PLENTY_USERNAME", "demo")
	t.Setenv("WATCHER_PLENTY_PASSWORD", "demo")
	t.Setenv("WATCHER_STATE_PATH", "")
	t.Setenv("WATCHER_NATS_URL", "nats://"+natsAddr)
	return srv.URL, natsAddr
}
