package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/pipeline"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestServeOneMember: the fleet daemon serves its readiness (ready once
// every shop it runs is), the per-shop state report, each shop's own
// endpoints, the fleet totals and each shop's metrics with its shop
// label; it stops when cancelled.
func TestServeOneMember(t *testing.T) {
	w := newWorld(t, 3)
	cfg := base(w.natsURL)
	cfg.ShopsFile, cfg.StateDir, cfg.InstanceID = w.registry, filepath.Join(t.TempDir(), "shops"), "solo"
	base, stop := serve(t, &cfg, ServeOptions{Registry: prometheus.NewRegistry(), Version: "test"})
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before any shop is taken: %d %s", code, body)
	}
	testnats.WaitForEvery(t, "/readyz 200 with every shop active", 60*time.Second, 100*time.Millisecond, func() bool {
		code, _ := get(t, base+"/readyz")
		_, body := get(t, base+"/state")
		return code == http.StatusOK && strings.Count(body, `"state": "active"`) == 3
	})
	_, body := get(t, base+"/state")
	var rep Report
	if err := json.Unmarshal([]byte(body), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Counts[StateActive] != 3 || !rep.Ready || rep.Instance != "solo" || rep.Members["solo"] != 3 {
		t.Errorf("state report %s", body)
	}
	for _, s := range rep.Shops {
		if s.State != StateActive || s.Ready == nil || !*s.Ready || s.Holder != "solo" {
			t.Errorf("shop %+v", s)
		}
	}
	if code, body := get(t, base+"/shops/shop-002/state"); code != http.StatusOK || !strings.Contains(body, `"watermark"`) {
		t.Errorf("/shops/shop-002/state: %d %s", code, body)
	}
	if code, _ := get(t, base+"/shops/nope/state"); code != http.StatusNotFound {
		t.Errorf("/shops/nope/state: %d, want 404", code)
	}
	_, metrics := get(t, base+"/metrics")
	for _, want := range []string{`orderwatch_fleet_shops{state="active"} 3`, `orderwatch_fleet_shops{state="invalid"} 0`, `orderwatch_fleet_members 1`,
		`orderwatch_leader{shop="shop-001"} 1`, `orderwatch_outbox_depth{shop="shop-003"} 0`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}
}

// serve runs a member with Serve (the shops' passwords "demo") until stop
// or the end of the test: the URL of its HTTP address. stop returns what
// Serve returned.
func serve(t *testing.T, cfg *pipeline.Config, opt ServeOptions) (url string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	opt.Getenv = func(string) string { return "demo" }
	opt.Ready = func(a string) { addr <- a }
	go func() { done <- Serve(ctx, cfg, opt) }()
	stop = sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { _ = stop() })
	select {
	case a := <-addr:
		return "http://" + a, stop
	case err := <-done:
		done <- err // for stop
		t.Fatalf("Serve: %v", err)
	}
	return "", nil
}

// TestServeConfigErrors: a missing registry file or a fleet without a
// stream is a configuration error at the start.
func TestServeConfigErrors(t *testing.T) {
	natsURL := testnats.Start(t).ClientURL()
	for name, change := range map[string]func(c *pipeline.Config){
		"no registry file": func(c *pipeline.Config) { c.ShopsFile = filepath.Join(t.TempDir(), "none.json") },
		"no stream":        func(c *pipeline.Config) { c.Stream = "" },
		"no lease":         func(c *pipeline.Config) { c.Lease = false },
		"bad registry": func(c *pipeline.Config) {
			c.ShopsFile = filepath.Join(t.TempDir(), "bad.json")
			os.WriteFile(c.ShopsFile, []byte(`{"shops":`), 0o600)
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := base(natsURL)
			cfg.ShopsFile, cfg.StateDir = filepath.Join(t.TempDir(), "shops.json"), t.TempDir()
			os.WriteFile(cfg.ShopsFile, []byte(`{"shops":[]}`), 0o600)
			change(&cfg)
			err := Serve(context.Background(), &cfg, ServeOptions{})
			var ce *pipeline.ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("Serve: %v, want a configuration error", err)
			}
		})
	}
}
