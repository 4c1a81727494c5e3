package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func setBase(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "WATCHER_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("WATCHER_PLENTY_URL", "https://shop.example")
	t.Setenv("WATCHER_PLENTY_USERNAME", "api")
	t.Setenv("WATCHER_PLENTY_PASSWORD", "secret")
}

func TestConfigDefaults(t *testing.T) {
	setBase(t)
	c, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.PollInterval != 0 || c.Settle != 0 || c.Overlap != 0 || c.Stream != "ORDERS" || !c.StreamCreate || c.CallShare != 0.25 || c.StartFrom.Back != 720*time.Hour ||
		c.SubjectPrefix != "orders" || c.HTTPAddr != ":9090" || c.ShutdownTimeout != 20*time.Second || c.DuplicateWindow != 10*time.Minute ||
		c.Keyset != "auto" {
		t.Errorf("defaults: %+v", c)
	}
}

func TestConfigStartFrom(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"48h":                       now.Add(-48 * time.Hour),
		"2026-10-01T00:00:00+02:00": time.Date(2026, 9, 30, 22, 0, 0, 0, time.UTC),
	} {
		var s StartFrom
		if err := s.Decode(in); err != nil {
			t.Fatal(err)
		}
		if !s.Time(now).Equal(want) {
			t.Errorf("%s -> %v, want %v", in, s.Time(now), want)
		}
	}
	for _, bad := range []string{"yesterday", "-5h", "2026-10-01"} {
		var s StartFrom
		if err := s.Decode(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestConfigSecretFiles(t *testing.T) {
	setBase(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	os.WriteFile(file, []byte("from-file\n"), 0o600)
	t.Setenv("WATCHER_PLENTY_PASSWORD", "")
	t.Setenv("WATCHER_PLENTY_PASSWORD_FILE", file)
	t.Setenv("WATCHER_NATS_TOKEN_FILE", file)
	c, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.PlentyPassword != "from-file" || c.NATSToken != "from-file" {
		t.Errorf("password %q token %q: the file's content without the newline", c.PlentyPassword, c.NATSToken)
	}
	t.Setenv("WATCHER_PLENTY_PASSWORD", "also")
	if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), "both set") {
		t.Errorf("value and file both set: %v", err)
	}
}

func TestConfigErrorsNameTheVariable(t *testing.T) {
	tests := map[string]string{
		"WATCHER_POLL_INTERVAL":  "fast",
		"WATCHER_SETTLE":         "-1s",
		"WATCHER_CALL_SHARE":     "0",
		"WATCHER_SUBJECT_PREFIX": "orders.*",
		"WATCHER_BAD_ENTRIES":    "ignore",
		"WATCHER_KEYSET":         "sometimes",
		"WATCHER_LOG_FORMAT":     "xml",
		"WATCHER_LOG_LEVEL":      "loud",
		"WATCHER_SCOPE":          "statusId=between:5",
		"WATCHER_SCOPE_JSON":     `{"conditionType":"xor"}`,
		"WATCHER_PLENTY_URL":     "shop.example",
		"WATCHER_START_FROM":     "last week",
		"WATCHER_STREAM_CREATE":  "maybe",
	}
	for name, value := range tests {
		t.Run(name, func(t *testing.T) {
			setBase(t)
			t.Setenv(name, value)
			_, err := LoadConfig()
			var ce *ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: %v; want a ConfigError naming the variable", name, value, err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}
