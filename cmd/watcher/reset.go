package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/orderwatch/orderwatch/replica"
)

// runReset is `watcher reset [--force] [--lease]`: the group starts over
// (replica.Reset).
func runReset(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("reset", flag.ContinueOnError)
	force := fl.Bool("force", false, "clear although a replica holds the lease: only for one known to be gone (a running one writes its checkpoint back, undoing the reset)")
	withLease := fl.Bool("lease", false, "delete the lease too")
	shop := shopFlag(fl)
	if code, ok := parseArgs(fl, args, 0, stdout, stderr); !ok {
		return code
	}
	cfg, nc, code := groupConn("reset", *shop, stderr)
	if nc == nil {
		return code
	}
	defer nc.Close()
	if cfg.PlentyURL == "" || cfg.Stream == "" {
		fmt.Fprintf(stderr, "watcher reset: configuration: %s_PLENTY_URL and %s_STREAM name the group; both are needed\n", envPrefix, envPrefix)
		return exitConfig
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	keys := []string{cfg.GroupKey()}
	if k := cfg.LegacyGroupKey(); k != keys[0] {
		keys = append(keys, k)
	}
	rep, err := replica.Reset(rctx, nc, cfg.LeaseBucket, keys, replica.ResetOptions{Force: *force, Lease: *withLease})
	if err != nil {
		fmt.Fprintf(stderr, "watcher reset: shop %s: %v (-force)\n", cfg.Shop(), err)
		return exitFail
	}
	none := func(s []string) string { return strings.Join(append(s, "none")[:max(len(s), 1)], ", ") }
	fmt.Fprintf(stdout, "shop %s, buckets %s_*: checkpoints cleared: %s; snapshot dumps cleared: %s; leases cleared: %s\n",
		cfg.Shop(), cfg.LeaseBucket, none(rep.Checkpoints), none(rep.Dumps), none(rep.Leases))
	if rep.Holder.Instance != "" {
		fmt.Fprintf(stderr, "watcher reset: %s held the lease: if it runs, its next checkpoint (within 10 s, and at its stop) undoes this reset; stop every replica, then reset again\n", rep.Holder.Instance)
	}
	files := "the replicas' state files (WATCHER_STATE_PATH; in Kubernetes their claims)"
	if *shop != "" {
		files = fmt.Sprintf("%s on every member of the fleet (the member running the shop: stop it, or remove the shop from the registry first)", cfg.StatePath)
	}
	fmt.Fprintf(stdout, "Delete %s before they start again: the first sweep then starts at WATCHER_START_FROM.\n", files)
	return exitOK
}
