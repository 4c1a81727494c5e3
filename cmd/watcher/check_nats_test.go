package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// waitedForNATS is the bound of the commands below against a refused
// connection: a command that waits for NATS takes 10 s at least; the rest
// is margin for a loaded machine.
const waitedForNATS = 9 * time.Second

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
	if took > waitedForNATS {
		t.Errorf("check took %v against a refused connection: it waited for NATS", took)
	}
	t.Logf("check against a closed port (%v):\n%s", took.Round(time.Millisecond), out.String())
}

// TestGroupCommandsNATSRefusedAnswerAtOnce: `watcher rescan` and `watcher
// reset` talk to the group through NATS; with nothing listening at
// WATCHER_NATS_URL they fail at the first refused connection, as check
// does, naming the URL, the cause and the fix (they used to wait 10 s and
// say "not connected within 10s").
func TestGroupCommandsNATSRefusedAnswerAtOnce(t *testing.T) {
	_, dead := noStateCheckEnv(t)
	for _, args := range [][]string{{"rescan", "--from", "1h"}, {"reset"}} {
		var out, errOut bytes.Buffer
		start := time.Now()
		code := run(t.Context(), args, &out, &errOut)
		took := time.Since(start)
		if code != exitFail {
			t.Errorf("%s: exit %d, want %d\n%s%s", args[0], code, exitFail, out.String(), errOut.String())
		}
		want := "watcher " + args[0] + ": cannot reach NATS at nats://" + dead + ": connection refused: start NATS there, or set WATCHER_NATS_URL to where it listens"
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("%s's error is not %q:\n%s", args[0], want, errOut.String())
		}
		if took > waitedForNATS {
			t.Errorf("%s took %v against a refused connection: it waited for NATS", args[0], took)
		}
	}
}
