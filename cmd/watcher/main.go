// Command watcher is orderwatch: it turns the order search of a commerce
// REST service without webhooks into a stream of typed order events on NATS.
//
//	watcher [run]   the daemon (default)
//	watcher demo    simulator + embedded NATS + watcher, events printed
//	watcher check   validate the config, log in, search once, check NATS
//	watcher state   what the state file holds
//	watcher version
//	watcher help    the configuration table
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C ends the process at once
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit statuses.
const (
	exitOK     = 0
	exitFail   = 1
	exitConfig = 2
)

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, "usage: watcher [run|demo|check|state|version|help]")
		fmt.Fprintln(stdout, "\nConfiguration (environment variables):")
		if err := writeUsage(stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return exitFail
		}
		return exitOK
	case "version":
		fmt.Fprintln(stdout, "orderwatch", version)
		return exitOK
	case "run":
		return runWatcher(ctx, stderr)
	case "demo":
		return runDemo(ctx, args, stdout, stderr)
	case "check":
		return runCheck(ctx, stdout, stderr)
	case "state":
		return runState(stdout, stderr)
	}
	fmt.Fprintf(stderr, "watcher: unknown command %q (try: watcher help)\n", cmd)
	return exitConfig
}

// runWatcher is `watcher run`: the daemon until SIGTERM/SIGINT.
func runWatcher(ctx context.Context, stderr io.Writer) int {
	cfg, err := LoadConfig()
	if err != nil {
		fmt.Fprintln(stderr, "watcher: configuration:", err)
		return exitConfig
	}
	log := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	d, err := newDaemon(cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		var ce *ConfigError
		if errors.As(err, &ce) {
			return exitConfig
		}
		return exitFail
	}
	if err := d.run(ctx); err != nil {
		log.Error("stopped with an error", "err", err)
		return exitFail
	}
	return exitOK
}
