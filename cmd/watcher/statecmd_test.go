package main

import (
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/state"
)

func TestFirstSyncProgress(t *testing.T) {
	base := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	back := StartFrom{Back: 100 * time.Hour}
	at := StartFrom{At: base.Add(-10 * time.Hour)}
	for _, tt := range []struct {
		name  string
		st    state.Stats
		start StartFrom
		want  float64
	}{
		{"not started", state.Stats{}, back, 0},
		{"baseline recorded, no slice yet", state.Stats{Baseline: base}, back, 0},
		{"a quarter, start as a duration", state.Stats{Baseline: base, Watermark: base.Add(-75 * time.Hour)}, back, 0.25},
		{"half, start as a time", state.Stats{Baseline: base, Watermark: base.Add(-5 * time.Hour)}, at, 0.5},
		{"watermark before the start", state.Stats{Baseline: base, Watermark: base.Add(-20 * time.Hour)}, at, 0},
		{"done", state.Stats{Baseline: base, Watermark: base.Add(time.Hour), BaselineDone: true}, back, 1},
		{"start after the baseline", state.Stats{Baseline: base, Watermark: base}, StartFrom{At: base.Add(time.Hour)}, 0},
	} {
		if got := firstSyncProgress(tt.st, tt.start); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestLocalURL(t *testing.T) {
	for addr, want := range map[string]string{
		":9090":          "http://127.0.0.1:9090",
		"0.0.0.0:9090":   "http://127.0.0.1:9090",
		"[::]:9090":      "http://127.0.0.1:9090",
		"10.1.2.3:9090":  "http://10.1.2.3:9090",
		"localhost:8080": "http://localhost:8080",
		"[::1]:9090":     "http://[::1]:9090",
	} {
		if got := localURL(addr); got != want {
			t.Errorf("localURL(%q) = %q, want %q", addr, got, want)
		}
	}
}
