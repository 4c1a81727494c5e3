package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/schemas"
)

func TestEndToEnd(t *testing.T) {
	bin := e2e.Watcher(t)
	sim := plentysim.New(plentysim.Config{Seed: 42})
	sim.Generate(200, time.Now().Add(-48*time.Hour), time.Now().Add(-time.Minute))
	srv := httptest.NewServer(sim)
	defer srv.Close()
	ns := testnats.Start(t)
	addr := e2e.FreeAddr(t)
	passFile := filepath.Join(t.TempDir(), "password")
	os.WriteFile(passFile, []byte("demo\n"), 0o600)

	cmd := exec.Command(bin, "run")
	cmd.Env = append(os.Environ(),
		"WATCHER_PLENTY_URL="+srv.URL, "WATCHER_PLENTY_USERNAME=demo", "WATCHER_PLENTY_PASSWORD_FILE="+passFile,
		"WATCHER_NATS_URL="+ns.ClientURL(), "WATCHER_STATE_PATH="+filepath.Join(t.TempDir(), "state.db"),
		"WATCHER_POLL_INTERVAL=500ms", "WATCHER_SETTLE=1s", "WATCHER_OVERLAP=5s", "WATCHER_HTTP_ADDR="+addr,
		"WATCHER_SHUTDOWN_TIMEOUT=5s",
	)
	var logs strings.Builder
	var logMu sync.Mutex
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			logs.WriteString(sc.Text() + "\n")
			logMu.Unlock()
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
		if t.Failed() {
			logMu.Lock()
			t.Logf("watcher log:\n%s", logs.String())
			logMu.Unlock()
		}
	}()

	base := "http://" + addr
	e2e.WaitFor(t, "/readyz", 30*time.Second, func() bool { code, _ := e2e.Get(base + "/readyz"); return code == 200 })
	if code, _ := e2e.Get(base + "/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}

	// Changes after the baseline become events on the stream.
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	orders := sim.Orders()
	if orders[0].StatusID == "7.01" {
		orders[0].StatusID = "7"
		sim.SetStatus(orders[0].ID, "7")
		time.Sleep(1100 * time.Millisecond) // a later second for the change under test
	}
	sim.SetStatus(orders[0].ID, "7.01")
	lock := "permanentlyLocked"
	if orders[1].LockStatus == lock {
		lock = "unlocked"
	}
	sim.SetLock(orders[1].ID, lock)
	created := sim.AddOrder(plentysim.Order{StatusID: "3"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, "ORDERS", jetstream.OrderedConsumerConfig{FilterSubjects: []string{"orders.>"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for len(seen) < 3 {
		msg, err := cons.Next(jetstream.FetchMaxWait(20 * time.Second))
		if err != nil {
			t.Fatalf("waiting for events (have %v): %v", seen, err)
		}
		if err := schemas.Validate(msg.Data()); err != nil {
			t.Errorf("event on %s does not validate: %v\n%s", msg.Subject(), err, msg.Data())
		}
		if msg.Headers().Get("Nats-Msg-Id") == "" || msg.Headers().Get("Content-Type") != "application/cloudevents+json" {
			t.Errorf("headers %v", msg.Headers())
		}
		seen[msg.Subject()] = string(msg.Data())
	}
	for _, subj := range []string{
		fmt.Sprintf("orders.status_changed.%s.7_01.%d", strings.ReplaceAll(orders[0].StatusID, ".", "_"), orders[0].ID),
		fmt.Sprintf("orders.lock_changed.%d", orders[1].ID),
		fmt.Sprintf("orders.created.%d", created.ID),
	} {
		if _, ok := seen[subj]; !ok {
			t.Errorf("no event on %s; got %v", subj, keys(seen))
		}
	}

	e2e.WaitFor(t, "an empty outbox", 30*time.Second, func() bool {
		_, m := e2e.Get(base + "/metrics")
		return strings.Contains(m, "orderwatch_outbox_depth 0")
	})
	_, metrics := e2e.Get(base + "/metrics")
	for _, name := range []string{"orderwatch_api_calls_total{code=\"200\",route=\"orders_search\"}", "orderwatch_sweep_duration_seconds_count",
		"orderwatch_events_total{type=\"order.created\"}", "orderwatch_events_published_total", "orderwatch_outbox_depth 0",
		"orderwatch_watermark_lag_seconds", "orderwatch_watermark_timestamp_seconds", "orderwatch_nats_connected 1", "orderwatch_state_writable 1", "orderwatch_api_calls_left{period=\"short\"}",
		"orderwatch_throttle_wait_seconds_total", "orderwatch_rescans_total", "orderwatch_orders_scanned_total"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	logMu.Lock()
	sweepLine := strings.Contains(logs.String(), `"msg":"sweep"`) && strings.Contains(logs.String(), `"calls":`)
	leaked := strings.Contains(logs.String(), "demo\"") || strings.Contains(logs.String(), "access_token")
	logMu.Unlock()
	if !sweepLine {
		t.Error("no JSON sweep line with its figures in the log")
	}
	if leaked {
		t.Error("the log shows a credential")
	}

	// SIGTERM: exit 0, bounded by the shutdown timeout (5 s; the margin is
	// for a loaded machine: a shutdown that is not bounded never ends).
	start := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
		if took := time.Since(start); took > 15*time.Second {
			t.Errorf("SIGTERM took %v, shutdown timeout 5s", took)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no exit 60s after SIGTERM")
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestBadConfigExits2(t *testing.T) {
	bin := e2e.Watcher(t)
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{"WATCHER_PLENTY_USERNAME=u", "WATCHER_PLENTY_PASSWORD=p"}, "WATCHER_PLENTY_URL"},
		{[]string{"WATCHER_PLENTY_URL=http://x", "WATCHER_PLENTY_USERNAME=u", "WATCHER_PLENTY_PASSWORD=p", "WATCHER_POLL_INTERVAL=soon"}, "WATCHER_POLL_INTERVAL"},
		{[]string{"WATCHER_PLENTY_URL=http://x", "WATCHER_PLENTY_USERNAME=u", "WATCHER_PLENTY_PASSWORD=p", "WATCHER_CALL_SHARE=2"}, "WATCHER_CALL_SHARE"},
		{[]string{"WATCHER_PLENTY_URL=http://x", "WATCHER_PLENTY_USERNAME=u", "WATCHER_PLENTY_PASSWORD_FILE=/nonexistent"}, "WATCHER_PLENTY_PASSWORD_FILE"},
		{[]string{"WATCHER_PLENTY_URL=http://x", "WATCHER_PLENTY_USERNAME=u", "WATCHER_PLENTY_PASSWORD=p", "WATCHER_SCOPE=statusId=like:5"}, "WATCHER_SCOPE"},
	}
	for _, tt := range tests {
		cmd := exec.Command(bin, "run")
		cmd.Env = append(e2e.CleanEnv(), tt.env...)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: exit %v, want status 2", tt.env, err)
		}
		if lines := strings.Count(strings.TrimSpace(string(out)), "\n") + 1; !strings.Contains(string(out), tt.want) || lines != 1 {
			t.Errorf("%v: output %q must be one line naming %s", tt.env, out, tt.want)
		}
	}
}

// startDemo runs `watcher demo` (a 40 s run at 4 changes/s, a sweep a
// second) and returns its output lines; the demo is stopped with SIGINT
// when the test ends.
func startDemo(t *testing.T) <-chan string {
	t.Helper()
	cmd := exec.Command(e2e.Watcher(t), "demo", "-for", "40s", "-rate", "4", "-interval", "1s")
	cmd.Env = e2e.CleanEnv()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 64)
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		go func() { // keep reading, so the demo never blocks on its output
			for range lines {
			}
		}()
		cmd.Wait()
	})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return lines
}

func TestDemoPrintsEvents(t *testing.T) {
	lines := startDemo(t)
	deadline := time.After(90 * time.Second)
	var head []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo ended without an event; it printed:\n%s", strings.Join(head, "\n"))
			}
			head = append(head, l)
			if strings.Contains(l, " #") && strings.Contains(l, "orders.") {
				if !strings.Contains(strings.Join(head, "\n"), "nats --server") {
					t.Error("the demo's first lines must say how to watch with the nats CLI")
				}
				return
			}
		case <-deadline:
			t.Fatalf("no event within 90s; the demo printed:\n%s", strings.Join(head, "\n"))
		}
	}
}
