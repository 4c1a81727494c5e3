package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/orderwatch/orderwatch/fleet"
	"github.com/orderwatch/orderwatch/pipeline"
)

// runCheck is `watcher check [-shop ID]`: validate the config; when no
// watcher runs on the state file, open it, log in (or reuse the stored
// session) and search once, keeping the session in the file for `watcher
// run`; when a watcher holds the file, ask it over HTTP instead and open
// no session; then connect to NATS and check the stream. It says first how
// the scope was split, and prints a report; exit 0 only when all is well.
// In fleet mode it checks the shop -shop names, or every shop of the
// registry with a line each (fleet.Registry.CheckAll).
func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("check", flag.ContinueOnError)
	shop := shopFlag(fl)
	login := fl.Bool("login", false, "fleet mode with -shop: try the shop's credentials with a session of check's own (the stored one is not reused)")
	if code, ok := parseArgs(fl, args, 0, stdout, stderr); !ok {
		return code
	}
	for _, l := range unknownVarsText() {
		fmt.Fprintln(stdout, "WARN", l)
	}
	cfg, base, err := commandConfig(*shop, true, true)
	fleetMode := err == nil && base.ShopsFile != ""
	switch {
	case fleetMode:
		err = fleet.ValidateBase(base) // and the shop's entry, by the registry
	case err == nil:
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintln(stdout, "FAIL configuration:", err)
		return exitConfig
	}
	fmt.Fprintln(stdout, "ok   configuration")
	passed := false
	switch {
	case *shop != "":
		passed = fleet.CheckShop(ctx, cfg, base, *login, version, stdout)
	case fleetMode:
		reg, err := fleet.ReadRegistry(base, nil)
		if err != nil {
			fmt.Fprintln(stdout, "FAIL", err)
			return exitConfig
		}
		passed = reg.CheckAll(ctx, version, stdout)
	default:
		passed = pipeline.Check(ctx, cfg, version, stdout)
	}
	if !passed {
		fmt.Fprintln(stdout, "check failed")
		return exitFail
	}
	fmt.Fprintln(stdout, "check passed")
	return exitOK
}
