package main

import (
	"flag"

	"github.com/orderwatch/orderwatch/fleet"
)

// shopFlag defines -shop on the flags of check, state, rescan and reset
// (its text is their help on fleet mode).
func shopFlag(fl *flag.FlagSet) *string {
	more := map[string]string{
		"check": "; without it, every shop of the registry is checked, a line each",
		"state": ": its state file <WATCHER_STATE_DIR>/ID.db, or the member running it (WATCHER_HTTP_ADDR)",
		"reset": "; then delete <WATCHER_STATE_DIR>/ID.db on every member",
	}[fl.Name()]
	return fl.String("shop", "", "fleet mode (WATCHER_SHOPS_FILE): the `ID` of the registry's shop to act on"+more)
}

// commandConfig is the configuration a command acts on (not validated)
// and the base it was built from: the single shop's (WATCHER_*, cfg ==
// base; its _FILE secrets read when secrets), or with -shop the shop's of
// the fleet's registry, built as the fleet builds it
// (fleet.Registry.ShopConfig; secrets read). In fleet mode a shop must be
// named unless fleetWide (then cfg is the base). Errors are configuration
// errors.
func commandConfig(shop string, fleetWide, secrets bool) (cfg, base *Config, err error) {
	base, err = envConfig()
	if err == nil && (secrets || base.ShopsFile != "") {
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
	cfg, err = fleet.ShopConfigFor(base, shop, nil)
	return cfg, base, err
}
