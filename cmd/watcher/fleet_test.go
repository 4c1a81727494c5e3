package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	sim := plentysim.NewMulti(2, plentysim.Config{})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	registry := filepath.Join(t.TempDir(), "shops.json")
	var entries []string
	for _, id := range sim.IDs() {
		entries = append(entries, fmt.Sprintf(`{"id":%q,"url":%q,"username":"demo","passwordEnv":"TEST_SHOP_PW"}`, id, srv.URL+plentysim.TenantPath(id)))
	}
	os.WriteFile(registry, []byte(`{"shops":[`+strings.Join(entries, ",")+`]}`), 0o600)
	fleetEnv(t, registry)
	t.Setenv("TEST_SHOP_PW", "demo")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Setenv("WATCHER_HTTP_ADDR", addr)

	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"run"}, os.Stdout, &stderr) }()
	testnats.WaitForEvery(t, "the fleet member ready with both shops", 60*time.Second, 100*time.Millisecond, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		st, err := http.Get("http://" + addr + "/state")
		if err != nil {
			return false
		}
		var b bytes.Buffer
		b.ReadFrom(st.Body)
		st.Body.Close()
		return resp.StatusCode == http.StatusOK && strings.Count(b.String(), `"state": "active"`) == 2
	})
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d: %s", code, stderr.String())
	}

	fleetEnv(t, filepath.Join(t.TempDir(), "missing.json"))
	stderr.Reset()
	if code := run(context.Background(), []string{"run"}, os.Stdout, &stderr); code != exitConfig || !strings.Contains(stderr.String(), "WATCHER_SHOPS_FILE") {
		t.Errorf("missing registry: exit %d, %s", code, stderr.String())
	}
}
