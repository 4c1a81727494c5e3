package publisher_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/orderwatch/orderwatch/publisher"
)

// syncBuffer is a log sink for the NATS goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// NATS down at start-up: Connect succeeds, publishing waits in the outbox,
// and everything goes out once the server is there. Logs carry no secret.
func TestConnectBeforeServerStarts(t *testing.T) {
	port := freePort(t)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	url := fmt.Sprintf("nats://app:app-secret@127.0.0.1:%d", port)
	nc, err := publisher.Connect(publisher.ConnConfig{URL: url, ReconnectWait: 20 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatalf("Connect with NATS down: %v", err)
	}
	t.Cleanup(nc.Close)
	if nc.IsConnected() {
		t.Fatal("connected to nothing")
	}

	st := openStore(t, false)
	want := entries(1, 20, 2)
	commit(t, st, want)
	p := newPublisher(t, nc, st, func(c *publisher.Config) { c.Logger = log; c.AckTimeout = 300 * time.Millisecond })
	startRun(t, p)
	if p.Connected() {
		t.Error("Connected() with NATS down")
	}

	srv := runServer(t, func(o *server.Options) {
		o.Port = port
		o.Users = []*server.User{{Username: "app", Password: "app-secret"}}
	})
	waitFor(t, 20*time.Second, "outbox drained", func() bool { return st.OutboxDepth() == 0 })
	if !p.Connected() {
		t.Error("Connected() = false")
	}
	srv.restart()
	waitFor(t, 30*time.Second, "reconnect", func() bool { return strings.Contains(logs.String(), "NATS reconnected") })

	out := logs.String()
	for _, line := range []string{"NATS not reachable yet", "NATS connected", "NATS disconnected", "NATS reconnected", "publishing failed", "publishing recovered"} {
		if !strings.Contains(out, line) {
			t.Errorf("log lacks %q:\n%s", line, out)
		}
	}
	if strings.Contains(out, "app-secret") {
		t.Errorf("log shows the password:\n%s", out)
	}
	// One line per failure cause, not one per retry.
	if n := strings.Count(out, "publishing failed"); n > 5 {
		t.Errorf("%d failure lines for one outage:\n%s", n, out)
	}

	_, js := plainConn(t, fmt.Sprintf("nats://app:app-secret@127.0.0.1:%d", port))
	checkStream(t, readStream(t, js, stream), want)
}

func TestConnectConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for name, cfg := range map[string]publisher.ConnConfig{
		"no URL":              {},
		"creds and nkey":      {URL: "nats://127.0.0.1:1", CredsFile: "a.creds", NKeyFile: "b.nk"},
		"cert without key":    {URL: "nats://127.0.0.1:1", TLSCert: "c.pem"},
		"missing nkey file":   {URL: "nats://127.0.0.1:1", NKeyFile: filepath.Join(dir, "none.nk")},
		"missing creds file":  {URL: "nats://127.0.0.1:1", CredsFile: filepath.Join(dir, "none.creds")},
		"unparsable URL list": {URL: "nats://127.0.0.1:1, ://bad"},
	} {
		nc, err := publisher.Connect(cfg)
		if err == nil {
			nc.Close()
			t.Errorf("%s: Connect accepted %+v", name, cfg)
			continue
		}
		if cfg.Password != "" && strings.Contains(err.Error(), cfg.Password) {
			t.Errorf("%s: error shows the password", name)
		}
	}
}

// TestConnectNoRetryAtStartFailsAtOnce: with NoRetryAtStart (what `watcher
// check` asks for), a server list where nothing listens makes Connect itself
// fail, after one pass over the servers, with the refusal as the cause
// (nats.go reports refused connections as ErrNoServers). Without it (the daemon),
// TestConnectBeforeServerStarts: Connect succeeds and retries.
func TestConnectNoRetryAtStartFailsAtOnce(t *testing.T) {
	url := fmt.Sprintf("nats://127.0.0.1:%d, nats://127.0.0.1:%d", freePort(t), freePort(t))
	nc, err := publisher.Connect(publisher.ConnConfig{URL: url, NoRetryAtStart: true})
	if err == nil {
		nc.Close()
		t.Fatal("Connect with NoRetryAtStart and nothing listening returned a connection")
	}
	if !errors.Is(err, nats.ErrNoServers) {
		t.Errorf("Connect: %v, want the refusal (nats.ErrNoServers)", err)
	}
}
