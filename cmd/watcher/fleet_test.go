package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/fleet"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plentysim"
)

// fleetEnv sets the environment of `watcher run` in fleet mode.
func fleetEnv(t *testing.T, registry string) {
	t.Helper()
	setBase(t)
	for _, k := range []string{"WATCHER_PLENTY_URL", "WATCHER_PLENTY_USERNAME", "WATCHER_PLENTY_PASSWORD"} {
		os.Unsetenv(k)
	}
	t.Setenv("WATCHER_SHOPS_FILE", registry)
	t.Setenv("WATCHER_STATE_DIR", t.TempDir())
	t.Setenv("WATCHER_NATS_URL", testnats.Start(t).ClientURL())
	t.Setenv("WATCHER_LOG_LEVEL", "error")
}

// TestRunFleetMode: WATCHER_SHOPS_FILE switches `watcher run` to a fleet
// member, which serves the shops of the registry (no WATCHER_PLENTY_*
// needed) and its fleet readiness; a missing registry is exit status 2.
func TestRunFleetMode(t *testing.T) {
	registry := fleetShops(t, 2)
	fleetEnv(t, registry)
	cancel, done, stderr := startFleetMember(t)
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d: %s", code, stderr.String())
	}

	fleetEnv(t, filepath.Join(t.TempDir(), "missing.json"))
	stderr.Reset()
	if code := run(context.Background(), []string{"run"}, os.Stdout, stderr); code != exitConfig || !strings.Contains(stderr.String(), "WATCHER_SHOPS_FILE") {
		t.Errorf("missing registry: exit %d, %s", code, stderr.String())
	}
}

// fleetShops serves n simulated shops (shop-001 ...) and writes a registry
// of them (password: TEST_SHOP_PW, set here) followed by extra entries.
func fleetShops(t *testing.T, n int, extra ...string) (registry string) {
	t.Helper()
	sim := plentysim.NewMulti(n, plentysim.Config{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	var entries []string
	for _, id := range sim.IDs() {
		entries = append(entries, fmt.Sprintf(`{"id":%q,"url":%q,"username":"demo","passwordEnv":"TEST_SHOP_PW"}`, id, srv.URL+plentysim.TenantPath(id)))
	}
	registry = filepath.Join(t.TempDir(), "shops.json")
	if err := os.WriteFile(registry, []byte(`{"shops":[`+strings.Join(append(entries, extra...), ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_SHOP_PW", "demo")
	return registry
}

// startFleetMember runs `watcher run` in fleet mode (fleetEnv) on a free
// WATCHER_HTTP_ADDR until cancel, and waits until it is ready and runs
// every valid shop of the registry.
func startFleetMember(t *testing.T) (cancel context.CancelFunc, done chan int, stderr *bytes.Buffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Setenv("WATCHER_HTTP_ADDR", addr)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stderr, done = &bytes.Buffer{}, make(chan int, 1)
	go func() { done <- run(ctx, []string{"run"}, io.Discard, stderr) }()
	testnats.WaitForEvery(t, "the fleet member ready with every shop", 60*time.Second, 100*time.Millisecond, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		st, err := http.Get("http://" + addr + "/state")
		if err != nil {
			return false
		}
		var rep fleet.Report
		err = json.NewDecoder(st.Body).Decode(&rep)
		st.Body.Close()
		return err == nil && resp.StatusCode == http.StatusOK && rep.Counts[fleet.StateActive] == len(rep.Shops)
	})
	return cancel, done, stderr
}
