package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// readmeBlock returns the README's text between <!-- name:begin --> and
// <!-- name:end -->.
func readmeBlock(t *testing.T, name string) string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<!-- "+name+":begin -->\n")
	block, _, ok2 := strings.Cut(rest, "<!-- "+name+":end -->")
	if !ok || !ok2 {
		t.Fatalf("README.md has no %s:begin/%s:end markers", name, name)
	}
	return block
}

// TestReadmeConfigTable keeps the README's configuration table identical to
// what `watcher help` prints.
func TestReadmeConfigTable(t *testing.T) {
	table := readmeBlock(t, "config")
	var want bytes.Buffer
	if err := writeUsage(&want); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(table) != strings.TrimSpace(want.String()) {
		t.Errorf("the README's configuration table differs from `watcher help`; replace it with:\n%s", want.String())
	}
}

// readmeMax is the README's size limit: a user's guide that one reads top
// to bottom; details live in docs/ and are linked.
const readmeMax = 30_000

// TestReadmeStaysAGuide keeps the README within readmeMax bytes.
func TestReadmeStaysAGuide(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(readme) > readmeMax {
		t.Errorf("README.md is %d bytes, more than %d: move details to docs/ and link them", len(readme), readmeMax)
	}
}
