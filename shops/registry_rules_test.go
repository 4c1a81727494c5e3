package shops

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseRefusesTrailingContent: a registry followed by more content
// (two documents concatenated after a bad merge) is not a registry: the
// second part would be dropped without a word.
func TestParseRefusesTrailingContent(t *testing.T) {
	one := `{"shops":[{"id":"a","url":"http://a.example","username":"u","passwordEnv":"PW"}]}`
	two := `{"shops":[{"id":"b","url":"http://b.example","username":"u","passwordEnv":"PW"}]}`
	for _, data := range []string{one + "\n" + two, one + "\n]", one + " x", one + "{"} {
		valid, _, err := Parse([]byte(data), nil, env(map[string]string{"PW": "x"}))
		if err == nil || !strings.Contains(err.Error(), "after the registry") {
			t.Errorf("%q: err %v (valid %d), want an error about the content after the registry", data, err, len(valid))
		}
	}
	if _, _, err := Parse([]byte(one+"\n\n  \t\n"), nil, nil); err != nil {
		t.Errorf("white space after the registry: %v", err)
	}
}

// TestWatcherRefusesAFileOverTheLimit: the file is read every second; one
// larger than the stated limit is an error of the file (the shops in
// force stay), not read whole.
func TestWatcherRefusesAFileOverTheLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shops.json")
	one := `{"shops":[{"id":"a","url":"http://a.example","username":"u","passwordEnv":"PW"}]}`
	if err := os.WriteFile(path, []byte(one), 0o600); err != nil {
		t.Fatal(err)
	}
	w := NewWatcher(path, Options{Getenv: env(map[string]string{"PW": "x"}), MaxBytes: int64(len(one))})
	if up := w.Load(); up.FileErr != nil || len(up.Shops) != 1 {
		t.Fatalf("a file at the limit: %+v", up)
	}
	if err := os.WriteFile(path, []byte(one+" "), 0o600); err != nil {
		t.Fatal(err)
	}
	up, news := w.read()
	if !news || up.FileErr == nil || !strings.Contains(up.FileErr.Error(), "larger than the limit") || len(up.Shops) != 1 {
		t.Errorf("a file one byte over the limit: news %v, %+v", news, up)
	}
}
