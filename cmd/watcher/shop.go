package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/orderwatch/orderwatch/fleet"
	"github.com/orderwatch/orderwatch/pipeline"
)

// shopFlag defines -shop on the flags of check, state, rescan and reset.
func shopFlag(fl *flag.FlagSet) *string {
	return fl.String("shop", "", "fleet mode (WATCHER_SHOPS_FILE): the id of the registry's shop to act on")
}

// commandConfig is the configuration a command acts on (not validated)
// and the base it was built from: the single shop's (WATCHER_*, cfg ==
// base; its _FILE secrets not read: withSecrets), or with -shop the
// shop's of the fleet's registry, built as the fleet builds it
// (fleet.Registry.ShopConfig, secrets read). In fleet mode a shop must be
// named unless fleetWide (then cfg is the base). Errors are configuration
// errors.
func commandConfig(shop string, fleetWide bool) (cfg, base *Config, err error) {
	base, err = envConfig()
	if err == nil && base.ShopsFile != "" {
		err = readFiles(base)
	}
	switch {
	case err != nil:
		return nil, nil, err
	case shop == "" && (base.ShopsFile == "" || fleetWide):
		return base, base, nil
	case shop != "" && base.ShopsFile == "":
		return nil, nil, configErr("-shop names a shop of a fleet, and %s_SHOPS_FILE is not set", envPrefix)
	}
	reg, err := fleet.ReadRegistry(base, nil)
	if err != nil {
		return nil, nil, err
	}
	if shop == "" {
		return nil, nil, configErr("fleet mode (%s_SHOPS_FILE): name the shop with -shop (its shops: %s)", envPrefix, reg.Known())
	}
	if cfg, err = reg.ShopConfig(shop); err != nil {
		return nil, nil, configErr("%v", err)
	}
	return cfg, base, nil
}

// withSecrets reads the _FILE secrets of a single shop's configuration
// (commandConfig read those of a fleet's).
func withSecrets(cfg *Config, err error) (*Config, error) {
	if err == nil && cfg.ShopsFile == "" {
		err = readFiles(cfg)
	}
	return cfg, err
}

// checkFleet is `watcher check` in fleet mode without -shop: every shop of
// the registry is checked (pipeline.Check, one after the other) and gets
// one line; an invalid entry is a failure. It reports whether all passed.
func checkFleet(ctx context.Context, base *Config, stdout io.Writer) bool {
	reg, err := fleet.ReadRegistry(base, nil)
	if err != nil {
		fmt.Fprintln(stdout, "FAIL registry:", err)
		return false
	}
	fmt.Fprintf(stdout, "ok   registry %s: %d shops, %d invalid entries (details of one: watcher check -shop ID)\n", base.ShopsFile, len(reg.Shops), len(reg.Invalid))
	passed := len(reg.Invalid) == 0
	for _, err := range reg.Invalid {
		fmt.Fprintln(stdout, "FAIL", err)
	}
	for _, id := range reg.IDs() {
		cfg, err := reg.ShopConfig(id)
		var out bytes.Buffer
		if err == nil && !pipeline.Check(ctx, cfg, version, &out) {
			err = firstFailure(&out)
		}
		if err != nil {
			passed = false
			fmt.Fprintf(stdout, "FAIL shop %s: %v\n", id, err)
			continue
		}
		warnings := ""
		if n := strings.Count("\n"+out.String(), "\nWARN "); n > 0 {
			warnings = fmt.Sprintf(" (%d warnings)", n)
		}
		fmt.Fprintf(stdout, "ok   shop %s%s\n", id, warnings)
	}
	return passed
}

// firstFailure is the first FAIL line of a check's report, as an error.
func firstFailure(report io.Reader) error {
	sc := bufio.NewScanner(report)
	for sc.Scan() {
		if why, ok := strings.CutPrefix(sc.Text(), "FAIL "); ok {
			return fmt.Errorf("%s", why)
		}
	}
	return fmt.Errorf("failed")
}
