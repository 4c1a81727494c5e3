// Package e2e has what the tests that build and run the real binary
// share (cmd/watcher's end-to-end tests, the fault scenarios in faults/),
// and a buffer safe for a log written by another goroutine.
package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/testnats"
)

// build builds the real binary once per test binary.
var build = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "watcher-e2e-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "watcher")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/orderwatch/orderwatch/cmd/watcher").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// Watcher is the path of the binary built from ./cmd/watcher; the test is
// skipped with -short.
func Watcher(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the binary")
	}
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// FreeAddr is a loopback address with a port nothing listens on now.
func FreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// WaitFor polls cond every 50 ms (what the binary's tests always did: a
// scrape or a probe of the running binary) until it holds, failing the
// test after limit.
func WaitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	testnats.WaitForEvery(t, what, limit, 50*time.Millisecond, cond)
}

// Get makes a GET: the status (0 without an answer) and the body (the
// error's text without an answer).
func Get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// CleanEnv is the process environment without WATCHER_ variables.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WATCHER_") {
			env = append(env, kv)
		}
	}
	return env
}

// MetricValue reads the value of one series (name with its labels as
// Prometheus prints them) from a scrape; -1 when absent.
func MetricValue(metrics, name string) float64 {
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

// LockedBuffer is a bytes.Buffer safe for a writer and a reader at once
// (a log written by one goroutine and read by the test).
type LockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
