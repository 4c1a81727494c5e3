package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestReadmeCommands keeps the README's command list identical to what
// `watcher help` prints before the configuration table.
func TestReadmeCommands(t *testing.T) {
	block := readmeBlock(t, "commands")
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		l = strings.TrimPrefix(l, "  ")
		if strings.HasPrefix(l, "```") {
			continue
		}
		lines = append(lines, l)
	}
	if got, want := strings.TrimSpace(strings.Join(lines, "\n")), strings.TrimSpace(commandHelp); got != want {
		t.Errorf("the README's command list differs from `watcher help`; put this between the markers (indented by two spaces, in a code block):\n%s", want)
	}
}

// TestHelp: `watcher help` says what each command does, then prints the
// configuration table; an unknown command points to it.
func TestHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"help"}, &out, &errOut); code != exitOK {
		t.Fatalf("help: exit %d %s", code, errOut.String())
	}
	for _, cmd := range []string{"run", "demo", "check", "state", "version", "help"} {
		found := false
		for _, l := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == cmd {
				found = true
			}
		}
		if !found {
			t.Errorf("watcher help does not describe %q:\n%s", cmd, out.String())
		}
	}
	if !strings.Contains(out.String(), "| `WATCHER_STATE_PATH` |") {
		t.Error("watcher help lacks the configuration table")
	}
	out.Reset()
	if code := run(t.Context(), []string{"frobnicate"}, &out, &errOut); code != exitConfig || !strings.Contains(errOut.String(), "watcher help") {
		t.Errorf("unknown command: exit %d %q", code, errOut.String())
	}
}
