package testnats

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// ExternalEnv names a nats-server binary to run the tests of lease and
// mirror against (make nats-compat installs each release and sets it);
// unset, they use the server in process.
const ExternalEnv = "ORDERWATCH_NATS_SERVER"

// Server is a NATS server of a test: in process (*server.Server) or an
// external binary (StartAny).
type Server interface {
	ClientURL() string
	Shutdown()
	WaitForShutdown()
}

// StartAny starts the binary named by ORDERWATCH_NATS_SERVER on a free
// loopback port with JetStream and a temporary store directory, or, when
// unset, the server in process (Start).
func StartAny(tb testing.TB) Server {
	tb.Helper()
	bin := os.Getenv(ExternalEnv)
	if bin == "" {
		return Start(tb)
	}
	return startExternal(tb, bin)
}

type external struct {
	url  string
	cmd  *exec.Cmd
	once sync.Once
	done chan struct{}
}

func (e *external) ClientURL() string { return e.url }

func (e *external) Shutdown() {
	e.once.Do(func() { _ = e.cmd.Process.Kill() })
	<-e.done
}

func (e *external) WaitForShutdown() { <-e.done }

func startExternal(tb testing.TB, bin string) *external {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	var out bytes.Buffer
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", tb.TempDir())
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		tb.Fatalf("%s=%s: %v", ExternalEnv, bin, err)
	}
	e := &external{url: fmt.Sprintf("nats://127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(e.done) }()
	tb.Cleanup(e.Shutdown)
	for end := time.Now().Add(10 * time.Second); ; {
		nc, err := nats.Connect(e.url)
		if err == nil {
			nc.Close()
			return e
		}
		select {
		case <-e.done:
			tb.Fatalf("nats-server %s exited: %s", bin, out.String())
		default:
		}
		if time.Now().After(end) {
			tb.Fatalf("nats-server %s did not accept connections within 10s: %v", bin, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
