// Command watcher is orderwatch: it turns the order search of a commerce
// REST service without webhooks (plentymarkets' REST API) into a stream of
// typed order events on NATS. `watcher help` lists the commands and the
// configuration; see commandHelp.
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
		writeHelp(stdout)
		if err := writeUsage(stdout); err != nil {
			fmt.Fprintln(stderr, err)
			return exitFail
		}
		return exitOK
	case "version":
		b := readBuildInfo()
		fmt.Fprintf(stdout, "orderwatch %s (revision %s, %s)\n", b.version, b.revision, b.goVersion)
		return exitOK
	case "run":
		return runWatcher(ctx, stderr)
	case "demo":
		return runDemo(ctx, args, stdout, stderr)
	case "check":
		return runCheck(ctx, stdout, stderr)
	case "state":
		return runState(ctx, args, stdout, stderr)
	case "rescan":
		return runRescan(ctx, args, stdout, stderr) // rescan.go
	}
	fmt.Fprintf(stderr, "watcher: unknown command %q (try: watcher help)\n", cmd)
	return exitConfig
}

// commandHelp says what each command does (`watcher help`; the README's
// command list).
const commandHelp = `usage: watcher [command]

Commands:
  run                  The daemon (the default): sweeps the service's order search, diffs against
                       the state file, publishes events to NATS; serves /healthz, /readyz,
                       /metrics, /state and /state/orders/{id} on WATCHER_HTTP_ADDR. Stops on
                       SIGTERM/SIGINT after flushing the outbox.
  demo [flags]         A simulated shop, an embedded NATS server and the watcher in one process;
                       prints each event as a line, and a summary line when stopped (Ctrl-C).
                       Nothing leaves the machine. "watcher demo -h" lists its flags.
  check                Checks the configuration, the state file, the service and NATS. Logs in
                       only when no watcher runs on the state file (the session is kept there
                       for "watcher run"); otherwise asks the running watcher over HTTP and
                       opens no session. Exit 0 when all is well.
  state [-json] [ID]   What the state file holds (watermark, baseline, first-sync progress, last
                       sweep, orders tracked, outbox depth, file size), or the tracked state of
                       order ID as JSON. Asks the running watcher when it holds the file.
  rescan --from T [--to T]
                       Asks the active replica (through NATS) to read the period from T again
                       against its snapshot and publish only real differences (a repair after
                       an incident of the service). T: RFC 3339 or a duration back (6h).
  version              The version, VCS revision and Go version of this binary.
  help                 This text and the configuration table.
`

func writeHelp(w io.Writer) {
	fmt.Fprint(w, commandHelp)
	fmt.Fprintln(w, "\nConfiguration (environment variables):")
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
