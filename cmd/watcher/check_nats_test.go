package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestCheckNATSRefusedAnswersAtOnce: with nothing listening at
// WATCHER_NATS_URL, check does not wait for NATS the way `watcher run`
// does (run retries in the background for as long as it runs): it fails
// at the first refused connection, naming the URL, the cause and the fix,
// with check's failure status. The bound is loose on purpose (check used
// to wait 10 s); that check tries once is proved without a clock by
// publisher's TestConnectNoRetryAtStartFailsAtOnce.
func TestCheckNATSRefusedAnswersAtOnce(t *testing.T) {
	_, dead := noStateCheckEnv(t)
	var out, errOut bytes.Buffer
	start := time.Now()
	code := run(t.Context(), []string{"check"}, &out, &errOut)
	took := time.Since(start)
	if code != exitFail {
		t.Errorf("exit %d, want %d (check's failure)\n%s", code, exitFail, out.String())
	}
	want := "FAIL cannot reach NATS at nats://" + dead + ": connection refused: start NATS there, or set WATCHER_NATS_URL to where it listens"
	if !strings.Contains(out.String(), want) {
		t.Errorf("check's NATS line is not %q:\n%s", want, out.String())
	}
	if took > 5*time.Second {
		t.Errorf("check took %v against a refused connection: it waited for NATS", took)
	}
	t.Logf("check against a closed port (%v):\n%s", took.Round(time.Millisecond), out.String())
}
