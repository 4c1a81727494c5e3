package main

import (
	"maps"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestBuildInfoFrom(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "false"},
	}}
	dirty := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "true"},
	}}
	installed := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"}}
	for _, tt := range []struct {
		name string
		ld   string
		bi   *debug.BuildInfo
		ok   bool
		want buildInfo
	}{
		{"git clone", "dev", stamped, true, buildInfo{"dev", "0123456789abcdef0123456789abcdef01234567", "go1.26.8"}},
		{"modified files", "dev", dirty, true, buildInfo{"dev", "0123456789abcdef0123456789abcdef01234567-dirty", "go1.26.8"}},
		{"ldflags version wins", "v1.5.0", installed, true, buildInfo{"v1.5.0", "unknown", "go1.26.8"}},
		{"go install @version", "dev", installed, true, buildInfo{"v1.4.0", "unknown", "go1.26.8"}},
		{"no build info", "dev", nil, false, buildInfo{"dev", "unknown", runtime.Version()}},
	} {
		if got := buildInfoFrom(tt.ld, tt.bi, tt.ok); got != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// TestBuildInfoMetric: the collector exports orderwatch_build_info
// with this binary's stamps.
func TestBuildInfoMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfoCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	b := readBuildInfo()
	want := map[string]string{"version": b.version, "revision": b.revision, "goversion": runtime.Version()}
	for _, mf := range mfs {
		if mf.GetName() != "orderwatch_build_info" {
			continue
		}
		if len(mf.GetMetric()) != 1 || mf.GetMetric()[0].GetGauge().GetValue() != 1 {
			t.Fatalf("orderwatch_build_info = %v, want one series of value 1", mf.GetMetric())
		}
		got := map[string]string{}
		for _, l := range mf.GetMetric()[0].GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if !maps.Equal(got, want) {
			t.Errorf("orderwatch_build_info labels %v, want %v", got, want)
		}
		return
	}
	t.Error("no orderwatch_build_info")
}
