package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/pipeline"
)

// docDemoURL is the address docs/consuming.md gives for the state of
// `watcher demo` (demoHTTPAddr; the banner says which it took).
const docDemoURL = "http://127.0.0.1:9464"

// TestDemoShowsTheStateSide: a consumer's author who reads only
// docs/consuming.md and runs the demo can ask it for the orders in a
// status. The demo's banner prints the state endpoint and a `watcher
// state` line; that line and every `curl` and `watcher state` command of
// docs/consuming.md, pointed at the demo, answer with a listing, with no
// state file and no configuration.
func TestDemoShowsTheStateSide(t *testing.T) {
	doc, err := os.ReadFile("../../docs/consuming.md")
	if err != nil {
		t.Fatal(err)
	}
	curls := regexp.MustCompile(`curl -s '(`+regexp.QuoteMeta(docDemoURL)+`/state/orders\?[^']*)'`).FindAllStringSubmatch(string(doc), -1)
	states := regexp.MustCompile("`(?:go run \\./cmd/)?watcher (state -url "+regexp.QuoteMeta(docDemoURL)+" [^`]*)`").FindAllStringSubmatch(string(doc), -1)
	// A stranger learns from consuming.md alone how to start the demo and
	// how to build a copied example against a clone.
	for _, want := range []string{"go run ./cmd/watcher demo", "go mod edit -replace github.com/orderwatch/orderwatch=<clone>", "nats://127.0.0.1:4222"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/consuming.md does not say %q", want)
		}
	}
	if len(curls) < 2 || len(states) < 1 {
		t.Fatalf("docs/consuming.md has %d curl commands and %d `watcher state -url` commands for the demo (%s), want the listing and its next page, and the command line", len(curls), len(states), docDemoURL)
	}

	ctx, cancel := context.WithCancel(context.Background())
	out, banner := startDemoInProcess(t, ctx, "-interval", "1s", "-rate", "0.5")
	defer func() { cancel(); <-out }()
	m := regexp.MustCompile(`(?m)^  state +((http://[0-9.:]+)/state/orders\?status=5&olderThan=48h) `).FindStringSubmatch(banner)
	if m == nil {
		t.Fatalf("the demo's banner names no state endpoint:\n%s", banner)
	}
	web, stateURL := m[2], m[1]
	line := regexp.MustCompile(`(?m)^  go run \./cmd/watcher (state -url ` + regexp.QuoteMeta(web) + ` -status 5 -older-than 48h) +#`).FindStringSubmatch(banner)
	if line == nil {
		t.Fatalf("the demo's banner has no ready-to-paste `watcher state -url %s` line:\n%s", web, banner)
	}
	e2e.WaitFor(t, "the first sync", 60*time.Second, func() bool {
		b, err := pipeline.AskState(ctx, web, pipeline.StateQuery{List: map[string][]string{"limit": {"1"}}})
		return err == nil && !bytes.Contains(b, []byte(`"orders": []`))
	})

	for _, c := range curls {
		u := strings.Replace(c[1], docDemoURL, web, 1)
		code, body := e2e.Get(u)
		if code != 200 || listing(t, body) == nil {
			t.Errorf("docs/consuming.md's `curl -s '%s'` against the demo: %d %s", c[1], code, body)
		}
	}
	// The banner's state URL pasted as -url (the watcher's address is its
	// beginning) lists as well.
	for _, cmd := range []string{line[1], states[0][1], "state -url " + stateURL + " -status 5 -older-than 48h"} {
		args := strings.Fields(strings.Replace(cmd, docDemoURL, web, 1))[1:]
		t.Setenv("WATCHER_STATE_PATH", t.TempDir()+"/none.db") // no state file: -url needs none
		var stdout, stderr bytes.Buffer
		if code := runState(ctx, args, &stdout, &stderr); code != exitOK {
			t.Errorf("watcher %s: exit %d: %s", cmd, code, stderr.String())
			continue
		}
		orders := listing(t, stdout.String())
		if len(orders) == 0 {
			t.Errorf("watcher %s listed no order in status 5 of the demo's 300:\n%s", cmd, stdout.String())
		}
		for _, o := range orders {
			if o.State.StatusID != "5" || time.Since(o.StatusSince) < 48*time.Hour {
				t.Errorf("watcher %s listed order %d in status %s since %s", cmd, o.OrderID, o.State.StatusID, o.StatusSince)
			}
		}
	}
}

// listedOrder is an entry of GET /state/orders, as a consumer reads it.
type listedOrder struct {
	OrderID     int64     `json:"orderId"`
	StatusSince time.Time `json:"statusSince"`
	State       struct {
		StatusID json.Number `json:"statusId"`
	} `json:"state"`
}

func listing(t *testing.T, body string) []listedOrder {
	t.Helper()
	var page struct {
		Orders []listedOrder `json:"orders"`
		Next   *int64        `json:"next"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil || page.Orders == nil {
		t.Errorf("not a listing (%v): %s", err, body)
		return nil
	}
	return page.Orders
}

// startDemoInProcess runs `watcher demo args` in process until ctx ends and
// returns its banner (the lines before the first event); its later output
// is drained. out is closed when the demo has ended.
func startDemoInProcess(t *testing.T, ctx context.Context, args ...string) (out chan struct{}, banner string) {
	t.Helper()
	pr, pw := io.Pipe()
	out = make(chan struct{})
	go func() {
		defer close(out)
		code := runDemo(ctx, args, pw, io.Discard)
		pw.CloseWithError(io.EOF)
		if code != exitOK {
			t.Errorf("demo: exit %d", code)
		}
	}()
	sc := bufio.NewScanner(pr)
	var b strings.Builder
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), "Events as they happen") {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	return out, b.String()
}

// TestStateWithoutAFileNamesURL: `watcher state` with no state file at
// its path (a stranger next to the demo) says how to ask a running
// watcher instead; with -url and no watcher there it says who did not
// answer.
func TestStateWithoutAFileNamesURL(t *testing.T) {
	unsetWatcherEnv(t)
	t.Setenv("WATCHER_STATE_PATH", t.TempDir()+"/none.db")
	var stdout, stderr bytes.Buffer
	if code := runState(t.Context(), []string{"-status", "5", "-older-than", "48h"}, &stdout, &stderr); code != exitFail || !strings.Contains(stderr.String(), "-url") {
		t.Errorf("without a state file: exit %d, %q; want a hint at -url", code, stderr.String())
	}
	stderr.Reset()
	ln := e2e.FreeAddr(t) // nobody listens there
	if code := runState(t.Context(), []string{"-url", "http://" + ln, "2302"}, &stdout, &stderr); code != exitFail || !strings.Contains(stderr.String(), "no watcher answered at http://"+ln) {
		t.Errorf("-url with nobody there: exit %d, %q", code, stderr.String())
	}
}
