package main

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// revision may be set at build time with -ldflags "-X main.revision=..."
// where Go cannot stamp it (the Dockerfile: .git is not in the context).
var revision = ""

// buildInfo is what the binary knows about its build.
type buildInfo struct {
	version   string // -ldflags "-X main.version=...", else the module version (go install ...@vX), else "dev"
	revision  string // the VCS revision Go stamps into the binary ("-dirty" when built from modified files), else "unknown"
	goVersion string
}

// readBuildInfo reads the version stamps of the binary. Go stamps the VCS
// revision when it builds a main package inside a git clone (not with
// -buildvcs=false, nor in a git worktree, whose .git is a file).
func readBuildInfo() buildInfo {
	bi, ok := debug.ReadBuildInfo()
	b := buildInfoFrom(version, bi, ok)
	if revision != "" {
		b.revision = revision
	}
	return b
}

func buildInfoFrom(ldVersion string, bi *debug.BuildInfo, ok bool) buildInfo {
	b := buildInfo{version: ldVersion, revision: "unknown", goVersion: runtime.Version()}
	if !ok {
		return b
	}
	if bi.GoVersion != "" {
		b.goVersion = bi.GoVersion
	}
	if b.version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		b.version = bi.Main.Version
	}
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && b.revision != "unknown" {
		b.revision += "-dirty"
	}
	return b
}

// buildInfoCollector is orderwatch_build_info: 1, with the build's stamps as labels.
func buildInfoCollector() prometheus.Collector {
	b := readBuildInfo()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orderwatch_build_info", Help: "1, labelled with the version, the VCS revision and the Go version of the binary.",
		ConstLabels: prometheus.Labels{"version": b.version, "revision": b.revision, "goversion": b.goVersion},
	})
	g.Set(1)
	return g
}
