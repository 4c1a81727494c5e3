package testnats

import (
	"testing"
	"time"
)

// WaitFor polls cond every 10 ms until it holds, failing the test after
// limit: the way to wait for something a server or a background loop does.
func WaitFor(tb testing.TB, what string, limit time.Duration, cond func() bool) {
	tb.Helper()
	WaitForEvery(tb, what, limit, 10*time.Millisecond, cond)
}

// WaitForEvery is WaitFor polling every `every`.
func WaitForEvery(tb testing.TB, what string, limit, every time.Duration, cond func() bool) {
	tb.Helper()
	end := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(end) {
			tb.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(every)
	}
}
