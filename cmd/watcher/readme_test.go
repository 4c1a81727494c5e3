package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestReadmeConfigTable keeps the README's configuration table identical to
// what `watcher help` prints.
func TestReadmeConfigTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- config:begin -->\n")
	table, _, ok2 := strings.Cut(rest, "<!-- config:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no config:begin/config:end markers")
	}
	var want bytes.Buffer
	if err := writeUsage(&want); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(table) != strings.TrimSpace(want.String()) {
		t.Errorf("the README's configuration table differs from `watcher help`; replace it with:\n%s", want.String())
	}
}
