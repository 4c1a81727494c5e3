package pipeline

import (
	"testing"
)

func TestLocalURL(t *testing.T) {
	for addr, want := range map[string]string{
		":9090":          "http://127.0.0.1:9090",
		"0.0.0.0:9090":   "http://127.0.0.1:9090",
		"[::]:9090":      "http://127.0.0.1:9090",
		"10.1.2.3:9090":  "http://10.1.2.3:9090",
		"localhost:8080": "http://localhost:8080",
		"[::1]:9090":     "http://[::1]:9090",
	} {
		if got := LocalURL(addr); got != want {
			t.Errorf("LocalURL(%q) = %q, want %q", addr, got, want)
		}
	}
}
