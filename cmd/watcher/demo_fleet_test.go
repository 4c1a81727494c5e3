package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
)

// TestDemoFleet: `watcher demo -shops 2` runs two fleet members sharing
// two simulated shops: it prints events of both shops, each with its
// shop, says which member runs which shop, and with -leave the second
// member leaves and the first runs both; stopped, it ends with its
// summary.
func TestDemoFleet(t *testing.T) {
	unsetWatcherEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errOut e2e.LockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "-shops", "2", "-orders", "5", "-rate", "5", "-interval", "1s", "-leave", "2s", "-for", "2m"}, &out, &errOut)
	}()
	event := func(shop string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\d\d:\d\d:\d\d  ` + shop + ` +#\d+ .* orders\.` + shop + `\.`)
	}
	moved := regexp.MustCompile(`(?s)member-2 leaves .*fleet: member-1 runs shop-001, shop-002\n`)
	testnats.WaitForEvery(t, "events of both shops and the shops moved to member-1", 90*time.Second, 100*time.Millisecond, func() bool {
		s := out.String()
		return event("shop-001").MatchString(s) && event("shop-002").MatchString(s) && moved.MatchString(s)
	})
	// The banner's `watcher state` line asks member-1, which now runs both
	// shops, for a shop's listing.
	line := regexp.MustCompile(`(?m)^  go run \./cmd/watcher (state -url http://\S+ -shop shop-001 -status 5 -older-than 48h)$`).FindStringSubmatch(out.String())
	if line == nil {
		t.Errorf("the fleet demo's banner has no `watcher state -url ... -shop shop-001` line:\n%s", out.String())
	} else {
		var stdout, stderr strings.Builder
		if code := runState(ctx, strings.Fields(line[1])[1:], &stdout, &stderr); code != exitOK || !strings.Contains(stdout.String(), `"orders"`) {
			t.Errorf("watcher %s: exit %d: %s%s", line[1], code, stdout.String(), stderr.String())
		}
		// Without -shop a member has no listing and no single report: the
		// error says to name the shop, and which shops the member runs.
		member := strings.Fields(line[1])[2]
		for _, args := range [][]string{{"-url", member, "-status", "5"}, {"-url", member}, {"-url", member, "1042"}} {
			stdout.Reset()
			stderr.Reset()
			if code := runState(ctx, args, &stdout, &stderr); code != exitFail || !strings.Contains(stderr.String(), "-shop") || !strings.Contains(stderr.String(), "shop-001") {
				t.Errorf("watcher state %s against a fleet member: exit %d, %q%q; want an error naming -shop and the member's shops", strings.Join(args, " "), code, stdout.String(), stderr.String())
			}
		}
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("demo: exit %d: %s", code, errOut.String())
	}
	s := out.String()
	for _, want := range []string{"NATS and a fleet of two watcher members", "sub 'orders.>'", "kv watch orderwatch_lease", "fleet: member-"} {
		if !strings.Contains(s, want) {
			t.Errorf("the fleet demo's output lacks %q:\n%s", want, s)
		}
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if !regexp.MustCompile(`^summary: \d+ events printed for \d+ orders; the members made \d+ calls to the 2 shops \(\d+ logins?\) in \S+$`).MatchString(lines[len(lines)-1]) {
		t.Errorf("the fleet demo's last line is not its summary: %q", lines[len(lines)-1])
	}
}
