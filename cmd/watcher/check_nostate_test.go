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
	sim := plentysim.New(plentysim.Config{Seed: 1})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	setBase(t)
	t.Setenv("WATCHER_PLENTY_URL", srv.URL)
	t.Setenv("WATCHER_PLENTY_USERNAME", "demo")
	t.Setenv("WATCHER_PLENTY_PASSWORD", "demo")
	t.Setenv("WATCHER_STATE_PATH", "")
	t.Setenv("WATCHER_NATS_URL", "nats://"+closedAddr(t))
	var out, errOut bytes.Buffer
	run(t.Context(), []string{"check"}, &out, &errOut)
	for _, want := range []string{"ok   no state file (WATCHER_STATE_PATH is empty)", "ok   logged in to " + srv.URL, "ok   order search:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check without a state file lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "FAIL state file") {
		t.Errorf("check without a state file fails on it:\n%s", out.String())
	}
}
