package main

import (
	"bufio"
	"github.com/orderwatch/orderwatch/internal/e2e"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoSummaryOnSignal: stopped with SIGTERM (as with Ctrl-C), the demo
// ends with a summary line whose counts match what it printed.
func TestDemoSummaryOnSignal(t *testing.T) {
	bin := e2e.Watcher(t)
	cmd := exec.Command(bin, "demo", "-rate", "4", "-interval", "1s")
	cmd.Env = e2e.CleanEnv()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	isEvent := func(l string) bool { return strings.Contains(l, " #") && strings.Contains(l, "orders.") }
	var all []string
	events := 0
	deadline := time.After(90 * time.Second)
	for events == 0 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("demo ended early:\n%s", strings.Join(all, "\n"))
			}
			all = append(all, l)
			if isEvent(l) {
				events++
			}
		case <-deadline:
			t.Fatalf("no event within 90s:\n%s", strings.Join(all, "\n"))
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	for l := range lines {
		all = append(all, l)
		if isEvent(l) {
			events++
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("demo after SIGTERM: %v", err)
	}
	// The header tells how to consume the events with the examples, against
	// this demo's NATS.
	for _, ex := range []string{"since", "durable", "alert-webhook"} {
		if !regexp.MustCompile(`go run \./examples/` + ex + ` -nats nats://127\.0\.0\.1:\d+`).MatchString(strings.Join(all, "\n")) {
			t.Errorf("the demo does not say how to run examples/%s against its NATS", ex)
		}
	}
	last := all[len(all)-1]
	m := regexp.MustCompile(`^summary: (\d+) events printed for (\d+) orders; the watcher made (\d+) calls to the shop \((\d+) logins?\) in \S+$`).FindStringSubmatch(last)
	if m == nil {
		t.Fatalf("the demo's last line is not its summary: %q", last)
	}
	if n, _ := strconv.Atoi(m[1]); n != events {
		t.Errorf("summary says %s events, the demo printed %d", m[1], events)
	}
	if orders, _ := strconv.Atoi(m[2]); orders < 1 || orders > events {
		t.Errorf("summary says %s orders for %d events", m[2], events)
	}
	if calls, _ := strconv.Atoi(m[3]); calls < 2 || m[4] != "1" {
		t.Errorf("summary says %s calls and %s logins, want at least a login and a search, one login", m[3], m[4])
	}
}

// TestDescribeEventShowsLabels: the demo's line names the labels an event
// carries (countries, currencies, payment statuses), and nothing when it
// has none.
func TestDescribeEventShowsLabels(t *testing.T) {
	const labelled = `{"type":"order.created","data":{"orderId":7,"before":null,
		"after":{"statusId":5,"lockStatus":"unlocked"},
		"labels":{"countries":{"1":{"iso":"DE"},"255":{"iso":"DE","name":"Helgoland","territory":true},"12":{"iso":"GB"}},
		"currencies":{"EUR":{"code":"EUR","name":"Euro"}},"paymentStatuses":{"3":{"name":"Captured"}}}}}`
	if got, want := describeEvent([]byte(labelled)), "#7 created (status 5, unlocked) [DE, GB, EUR, payment Captured]"; got != want {
		t.Errorf("labelled event:\n got %q\nwant %q", got, want)
	}
	const plain = `{"type":"order.discovered","data":{"orderId":8,"before":null,"after":{"statusId":5.1,"lockStatus":"locked"}}}`
	if got, want := describeEvent([]byte(plain)), "#8 discovered (status 5.1, locked)"; got != want {
		t.Errorf("event without labels:\n got %q\nwant %q", got, want)
	}
}
