package main

import (
	"context"
	"fmt"
	"io"

	"github.com/orderwatch/orderwatch/pipeline"
)

// runCheck is `watcher check`: validate the config; when no watcher runs on
// the state file, open it, log in (or reuse the stored session) and search
// once, keeping the session in the file for `watcher run`; when a watcher
// holds the file, ask it over HTTP instead and open no session; then connect
// to NATS and check the stream. It says first how the scope was split, and
// prints a report; exit 0 only when all is well.
func runCheck(ctx context.Context, stdout, stderr io.Writer) int {
	cfg, err := LoadConfig()
	for _, l := range unknownVarsText() {
		fmt.Fprintln(stdout, "WARN", l)
	}
	if err != nil {
		fmt.Fprintln(stdout, "FAIL configuration:", err)
		return exitConfig
	}
	fmt.Fprintln(stdout, "ok   configuration")
	if !pipeline.Check(ctx, cfg, version, stdout) {
		fmt.Fprintln(stdout, "check failed")
		return exitFail
	}
	fmt.Fprintln(stdout, "check passed")
	return exitOK
}
