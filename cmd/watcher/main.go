// Command watcher is orderwatch: it turns the order search of a commerce
// REST service without webhooks (plentymarkets' REST API) into a stream of
// typed order events on NATS. `watcher help` lists the commands and the
// configuration; see commandHelp.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/orderwatch/orderwatch/pipeline"
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
		if code, ok := parseArgs(flag.NewFlagSet("run", flag.ContinueOnError), args, 0, stdout, stderr); !ok {
			return code
		}
		if os.Getenv(envPrefix+"_SHOPS_FILE") != "" {
			return runFleet(ctx, stderr) // fleet.go
		}
		return runWatcher(ctx, stderr)
	case "demo":
		return runDemo(ctx, args, stdout, stderr)
	case "check":
		return runCheck(ctx, args, stdout, stderr)
	case "state":
		return runState(ctx, args, stdout, stderr)
	case "rescan":
		return runRescan(ctx, args, stdout, stderr) // rescan.go
	case "reset":
		return runReset(ctx, args, stdout, stderr) // reset.go
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
  state [flags] [ID]   The state file's report (watermark, baseline, first sync, last sweep,
                       orders, outbox, size), order ID's state, or with -status/-older-than the
                       orders in a status, as JSON. Asks the watcher holding the file or at -url.
  rescan --from T [--to T]
                       Asks the active replica (through NATS) to read the period from T again
                       against its snapshot and publish only real differences (a repair after
                       an incident of the service). T: RFC 3339 or a duration back (6h).
  reset [flags]        Starts this shop's group over: clears its checkpoint and snapshot dump in
                       NATS (-lease: the lease too); refuses while a replica is active unless
                       -force. Then delete the replicas' state files: the first sweep starts at
                       WATCHER_START_FROM.
  version              The version, VCS revision and Go version of this binary.
  help                 This text and the configuration table.

"watcher COMMAND -h" prints the help of one command. Exit status 2 is a
configuration error (a bad or missing WATCHER_* value, a bad flag), 1 any
other failure.
`

func writeHelp(w io.Writer) {
	fmt.Fprint(w, commandHelp)
	fmt.Fprintln(w, "\nConfiguration (environment variables):")
}

// commandText is what commandHelp says about one command: its line with
// the arguments, then its description.
func commandText(name string) (usage, desc string) {
	var lines []string
	for l := range strings.Lines(commandHelp) {
		l = strings.TrimRight(l, "\n")
		switch {
		case strings.HasPrefix(l, "  "+name+" ") && lines == nil && len(l) > 23 && l[21:23] != "  ":
			usage, lines = strings.TrimSpace(l), []string{} // the usage fills the line; the description follows
		case strings.HasPrefix(l, "  "+name+" ") && lines == nil:
			usage = strings.TrimSpace(l[:min(len(l), 23)])
			lines = append(lines, strings.TrimSpace(l[min(len(l), 23):]))
		case lines != nil && strings.HasPrefix(l, strings.Repeat(" ", 23)):
			lines = append(lines, strings.TrimSpace(l))
		case lines != nil:
			return usage, strings.Join(lines, " ")
		}
	}
	return usage, strings.Join(lines, " ")
}

// parseArgs parses a command's arguments with fl (its flags defined). With
// -h or --help it prints the command's help on stdout and returns exitOK,
// false: the command does not run. An unknown flag, or more than maxArgs
// arguments, prints the help on stderr and returns exitConfig, false.
func parseArgs(fl *flag.FlagSet, args []string, maxArgs int, stdout, stderr io.Writer) (int, bool) {
	usage, desc := commandText(fl.Name())
	help := func(w io.Writer) {
		fmt.Fprintf(w, "usage: watcher %s\n\n", usage)
		for _, l := range wrap(desc, 80) {
			fmt.Fprintln(w, l)
		}
		fl.SetOutput(w)
		if hasFlags(fl) {
			fmt.Fprintln(w, "\nFlags:")
			fl.PrintDefaults()
		}
		if fl.Name() != "demo" {
			fmt.Fprintln(w, "\nConfiguration: the WATCHER_* environment variables (\"watcher help\" lists them).")
		}
	}
	fl.SetOutput(io.Discard)
	fl.Usage = func() {}
	err := fl.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		help(stdout)
		return exitOK, false
	case err != nil:
		fmt.Fprintf(stderr, "watcher %s: %v\n\n", fl.Name(), err)
		help(stderr)
		return exitConfig, false
	case fl.NArg() > maxArgs:
		fmt.Fprintf(stderr, "watcher %s: unexpected argument %q\n\n", fl.Name(), fl.Arg(maxArgs))
		help(stderr)
		return exitConfig, false
	}
	return exitOK, true
}

func hasFlags(fl *flag.FlagSet) bool {
	n := 0
	fl.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// wrap breaks text into lines of at most width bytes at spaces.
func wrap(text string, width int) []string {
	var lines []string
	var cur string
	for _, w := range strings.Fields(text) {
		if cur != "" && len(cur)+1+len(w) > width {
			lines = append(lines, cur)
			cur = ""
		}
		if cur != "" {
			cur += " "
		}
		cur += w
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// warnUnknownVars logs one line for each WATCHER_* variable the
// configuration does not know, naming the closest known one.
func warnUnknownVars(log *slog.Logger) {
	for _, u := range unknownVars(os.Environ()) {
		log.Warn("unknown configuration variable ignored", "var", u.name, "closest_known", u.closest)
	}
}

// runWatcher is `watcher run`: the daemon until SIGTERM/SIGINT.
func runWatcher(ctx context.Context, stderr io.Writer) int {
	cfg, err := LoadConfig()
	if err != nil {
		for _, l := range unknownVarsText() {
			fmt.Fprintln(stderr, "watcher: warning:", l)
		}
		fmt.Fprintln(stderr, "watcher: configuration:", err)
		return exitConfig
	}
	log := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	warnUnknownVars(log)
	d, err := newDaemon(cfg, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		var ce *ConfigError
		if errors.As(err, &ce) {
			return exitConfig
		}
		return exitFail
	}
	if err := d.Run(ctx); err != nil {
		log.Error("stopped with an error", "err", err)
		return exitFail
	}
	return exitOK
}

// newDaemon wires the pipeline of `watcher run` and `watcher demo` (package
// watcher) with the process's metrics registry.
func newDaemon(cfg *Config, log *slog.Logger) (*pipeline.Watcher, error) {
	return wire(cfg, log, prometheus.NewRegistry())
}

// registry is where the metrics are registered and gathered from.
type registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// wire registers the process's own collectors on reg (Go, process and
// orderwatch_build_info) and builds the pipeline, which adds its own.
func wire(cfg *Config, log *slog.Logger, reg registry) (*pipeline.Watcher, error) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoCollector())
	return pipeline.New(cfg, pipeline.Options{Logger: log, Registerer: reg, Gatherer: reg, Version: version})
}
