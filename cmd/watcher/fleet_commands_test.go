package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fleetCmd runs a command of this binary in the test's environment.
func fleetCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestCheckShopOfFleet: in fleet mode `watcher check -shop ID` checks that
// shop with the configuration the fleet builds for it (its tenant's URL,
// its state file in WATCHER_STATE_DIR); an unknown id lists the known
// ones, an invalid entry gives the registry's reason; without -shop every
// shop gets a line and an invalid entry fails the check; -shop without
// WATCHER_SHOPS_FILE is a configuration error.
func TestCheckShopOfFleet(t *testing.T) {
	registry := fleetShops(t, 2, `{"id":"broken","url":"http://127.0.0.1:1","username":"demo","passwordEnv":"TEST_UNSET_PW"}`)
	fleetEnv(t, registry)
	os.Unsetenv("TEST_UNSET_PW")
	stateDir := os.Getenv("WATCHER_STATE_DIR")

	code, out, errOut := fleetCmd(t, "check", "-shop", "shop-002")
	for _, want := range []string{"ok   shop shop-002 of " + registry, "/shops/shop-002 as demo", "ok   order search:", "check passed"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("check -shop shop-002: exit %d, lacks %q:\n%s%s", code, want, out, errOut)
		}
	}
	if _, err := os.Stat(filepath.Join(stateDir, "shop-002.db")); err != nil {
		t.Errorf("check -shop kept no session in the shop's state file: %v", err)
	}

	code, out, _ = fleetCmd(t, "check", "-shop", "nope")
	if code != exitConfig || !strings.Contains(out, `shop "nope" is not in `+registry+" (its shops: shop-001, shop-002)") {
		t.Errorf("check -shop nope: exit %d:\n%s", code, out)
	}
	code, out, _ = fleetCmd(t, "check", "-shop", "broken")
	if code != exitConfig || !strings.Contains(out, `invalid entry in `+registry) || !strings.Contains(out, "TEST_UNSET_PW") {
		t.Errorf("check -shop broken: exit %d:\n%s", code, out)
	}

	code, out, _ = fleetCmd(t, "check")
	for _, want := range []string{"ok   registry " + registry + ": 2 shops, 1 invalid entries", "\nok   shop shop-001", "\nok   shop shop-002", `FAIL shops[2] (id "broken")`, "check failed"} {
		if code != exitFail || !strings.Contains(out, want) {
			t.Errorf("check of the whole fleet: exit %d, lacks %q:\n%s", code, want, out)
		}
	}

	// shop-002's stored session was reused: its warning is named, with
	// the fleet's way to try the credentials.
	if !strings.Contains(out, "ok   shop shop-002 (1 warning)\n     WARN password not tried") || !strings.Contains(out, "watcher check -shop shop-002 -login") || strings.Contains(out, "WATCHER_STATE_PATH") {
		t.Errorf("check of the whole fleet: shop-002's warning not named, or single-shop advice:\n%s", out)
	}
	code, out, _ = fleetCmd(t, "check", "-shop", "shop-002", "-login")
	if code != exitOK || !strings.Contains(out, "-login: the credentials of shop shop-002 are tried") || strings.Contains(out, "password not tried") {
		t.Errorf("check -shop shop-002 -login: exit %d:\n%s", code, out)
	}

	t.Setenv("WATCHER_SHOPS_FILE", "")
	code, out, _ = fleetCmd(t, "check", "-shop", "shop-001")
	if code != exitConfig || !strings.Contains(out, "WATCHER_SHOPS_FILE is not set") {
		t.Errorf("check -shop without a registry: exit %d:\n%s", code, out)
	}
}

// TestCommandsOnAShopOfARunningFleet: `watcher state -shop ID` asks the member running
// the shop for the shop's own report (/shops/ID/state, the lease
// included) while it runs, and reads <WATCHER_STATE_DIR>/ID.db once it
// stopped; `check -shop` asks the running member instead of logging in;
// `rescan -shop` reaches the member running the shop and `reset -shop`
// clears the shop's group. Fleet mode without -shop and an unknown shop
// are configuration errors.
func TestCommandsOnAShopOfARunningFleet(t *testing.T) {
	fleetEnv(t, fleetShops(t, 2))
	statePath := filepath.Join(os.Getenv("WATCHER_STATE_DIR"), "shop-001.db")
	cancel, done, stderr := startFleetMember(t)

	code, out, errOut := fleetCmd(t, "state", "-shop", "shop-001", "-json")
	var rep struct {
		StateFile string          `json:"stateFile"`
		Lease     json.RawMessage `json:"lease"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || rep.StateFile != statePath || rep.Lease == nil {
		t.Errorf("state -shop shop-001 of a running member: exit %d, %v:\n%s%s", code, err, out, errOut)
	}
	code, out, errOut = fleetCmd(t, "check", "-shop", "shop-001")
	if code != exitOK || !strings.Contains(out, "ok   running watcher ready") || strings.Contains(out, "logged in") {
		t.Errorf("check -shop of a running member: exit %d:\n%s%s", code, out, errOut)
	}

	code, out, errOut = fleetCmd(t, "rescan", "-shop", "shop-002", "--from", "1h")
	if code != exitOK || !strings.Contains(out, "the next sweep reads from") {
		t.Errorf("rescan -shop shop-002 of a running member: exit %d:\n%s%s", code, out, errOut)
	}

	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("member: exit %d: %s", code, stderr.String())
	}
	code, out, errOut = fleetCmd(t, "reset", "-shop", "shop-002")
	if code != exitOK || !strings.Contains(out, "shop shop-002, buckets orderwatch_*: checkpoints cleared: shop-002.ORDERS") ||
		!strings.Contains(out, filepath.Join(os.Getenv("WATCHER_STATE_DIR"), "shop-002.db")+" on every member") {
		t.Errorf("reset -shop shop-002 of a stopped fleet: exit %d:\n%s%s", code, out, errOut)
	}
	code, out, errOut = fleetCmd(t, "state", "-shop", "shop-001")
	if code != exitOK || !strings.Contains(out, statePath) {
		t.Errorf("state -shop shop-001 of a stopped member: exit %d:\n%s%s", code, out, errOut)
	}
	code, _, errOut = fleetCmd(t, "state")
	if code != exitConfig || !strings.Contains(errOut, "name the shop with -shop (its shops: shop-001, shop-002)") {
		t.Errorf("state in fleet mode without -shop: exit %d: %s", code, errOut)
	}
	code, _, errOut = fleetCmd(t, "state", "-shop", "nope")
	if code != exitConfig || !strings.Contains(errOut, `shop "nope" is not in`) {
		t.Errorf("state -shop nope: exit %d: %s", code, errOut)
	}
}
