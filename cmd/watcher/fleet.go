package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/orderwatch/orderwatch/fleet"
)

// runFleet is `watcher run` with WATCHER_SHOPS_FILE set: this process is
// a member of a fleet (package fleet) until SIGTERM/SIGINT.
func runFleet(ctx context.Context, stderr io.Writer) int {
	cfg, err := envConfig()
	if err == nil {
		err = readFiles(cfg)
	}
	if err == nil {
		err = fleet.ValidateBase(cfg)
	}
	if err != nil {
		fmt.Fprintln(stderr, "watcher: configuration:", err)
		return exitConfig
	}
	log := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	warnUnknownVars(log)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoCollector())
	if err := fleet.Serve(ctx, cfg, fleet.ServeOptions{Logger: log, Registry: reg, Version: version}); err != nil {
		log.Error("fleet member stopped with an error", "err", err)
		var ce *ConfigError
		if errors.As(err, &ce) {
			return exitConfig
		}
		return exitFail
	}
	return exitOK
}
