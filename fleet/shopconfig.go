package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/shops"
)

// Registry is one reading of a fleet's registry file made as a member
// makes it (the same checks of every entry), for the commands that act on
// one shop of a fleet: `watcher check`, `state`, `rescan` and `reset`
// with -shop.
type Registry struct {
	Shops   []shops.Shop // the valid entries, sorted by id
	Invalid []error      // a *shops.EntryError for each invalid entry
	f       *Fleet       // builds the shops' configuration (shopConfig)
}

// ReadRegistry reads base.ShopsFile, checking every entry by the pipeline
// configuration built from it as Serve does. A file that cannot be read or
// parsed as a whole is a *pipeline.ConfigError. getenv resolves the
// passwordEnv references [os.Getenv].
func ReadRegistry(base *pipeline.Config, getenv func(string) string) (*Registry, error) {
	if base.ShopsFile == "" {
		return nil, pipeline.ConfigErrorf("%s_SHOPS_FILE is not set: -shop names a shop of a fleet's registry", pipeline.EnvPrefix)
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	instance := base.InstanceID
	if instance == "" {
		instance, _ = os.Hostname()
	}
	f := &Fleet{cfg: Config{Base: *base, StateDir: base.StateDir, Instance: instance, Getenv: getenv}}
	up := shops.NewWatcher(base.ShopsFile, f.RegistryOptions(nil)).Load()
	if up.FileErr != nil {
		return nil, pipeline.ConfigErrorf("%s_SHOPS_FILE: %v", pipeline.EnvPrefix, up.FileErr)
	}
	return &Registry{Shops: up.Shops, Invalid: up.Invalid, f: f}, nil
}

// IDs lists the valid shops' ids.
func (r *Registry) IDs() []string {
	ids := make([]string, len(r.Shops))
	for i, s := range r.Shops {
		ids[i] = s.ID
	}
	return ids
}

// ShopConfigFor is ReadRegistry then ShopConfig(id), for a command's
// -shop: every error is a *pipeline.ConfigError; an empty id is one that
// lists the shops.
func ShopConfigFor(base *pipeline.Config, id string, getenv func(string) string) (*pipeline.Config, error) {
	r, err := ReadRegistry(base, getenv)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, pipeline.ConfigErrorf("fleet mode (%s_SHOPS_FILE): name the shop with -shop (its shops: %s)", pipeline.EnvPrefix, r.Known())
	}
	c, err := r.ShopConfig(id)
	if err != nil {
		return nil, pipeline.ConfigErrorf("%v", err)
	}
	return c, nil
}

// Known lists the valid shops' ids for a message: the first 20, and how
// many there are beyond.
func (r *Registry) Known() string {
	ids := r.IDs()
	known := strings.Join(ids[:min(len(ids), 20)], ", ")
	switch {
	case len(ids) == 0:
		known = "none"
	case len(ids) > 20:
		known += fmt.Sprintf(" ... (%d in all)", len(ids))
	}
	return known
}

// ShopConfig is the pipeline configuration of shop id exactly as the
// member running it builds it (state file <WATCHER_STATE_DIR>/<id>.db,
// subjects, stream, group key, credentials), except HTTPAddr: the
// member's address followed by the shop's path, <WATCHER_HTTP_ADDR>/shops/<id>,
// where the member running the shop serves its /state and /readyz
// (pipeline.LocalURL keeps the path). An unknown id is an error listing
// the known ones; an invalid entry is its *shops.EntryError.
func (r *Registry) ShopConfig(id string) (*pipeline.Config, error) {
	for _, s := range r.Shops {
		if s.ID == id {
			c, err := r.f.shopConfig(s)
			if err != nil {
				return nil, fmt.Errorf("shop %s: %w", id, err)
			}
			c.HTTPAddr = r.f.cfg.Base.HTTPAddr + shopPath(id)
			return c, nil
		}
	}
	for _, err := range r.Invalid {
		var ee *shops.EntryError
		if errors.As(err, &ee) && ee.ID == id {
			return nil, fmt.Errorf("shop %s: invalid entry in %s: %w", id, r.f.cfg.Base.ShopsFile, err)
		}
	}
	return nil, fmt.Errorf("shop %q is not in %s (its shops: %s)", id, r.f.cfg.Base.ShopsFile, r.Known())
}

func shopPath(id string) string { return "/shops/" + id }

// HeldElsewhere asks the member at the address of a ShopConfig (GET
// /state of the fleet) whether another member holds the shop's lease:
// that member's name; "" when this member holds it, nobody does, or no
// member answers there. A state file read here is then not current.
func HeldElsewhere(ctx context.Context, shop *pipeline.Config) string {
	base := strings.TrimSuffix(pipeline.LocalURL(shop.HTTPAddr), shopPath(shop.ShopID))
	var rep Report
	code, body, err := pipeline.GetLocal(ctx, base, "/state")
	if err != nil || code != http.StatusOK || json.Unmarshal(body, &rep) != nil {
		return ""
	}
	for _, s := range rep.Shops {
		if s.ID == shop.ShopID && s.Holder != rep.Instance {
			return s.Holder
		}
	}
	return ""
}

// CheckAll is `watcher check` of a whole fleet: every shop is checked
// (pipeline.Check, one after the other) and gets one line on w, "ok   shop
// ID" (with its count of warnings, and the member running it when that is
// another) or "FAIL shop ID: " and its first failure; an invalid entry is
// a failure too. It reports whether all passed. version names the binary
// in the checks' User-Agent.
func (r *Registry) CheckAll(ctx context.Context, version string, w io.Writer) bool {
	fmt.Fprintf(w, "ok   registry %s: %d shops, %d invalid entries (details of one: watcher check -shop ID)\n", r.f.cfg.Base.ShopsFile, len(r.Shops), len(r.Invalid))
	passed := len(r.Invalid) == 0
	for _, err := range r.Invalid {
		fmt.Fprintln(w, "FAIL", err)
	}
	for _, id := range r.IDs() {
		cfg, err := r.ShopConfig(id)
		var out bytes.Buffer
		if err == nil && !pipeline.Check(ctx, cfg, version, &out) {
			err = firstFailure(&out)
		}
		if err != nil {
			passed = false
			fmt.Fprintf(w, "FAIL shop %s: %v\n", id, err)
			continue
		}
		warns := warnLines(fleetHints(out.String(), id))
		note := ""
		switch len(warns) {
		case 0:
		case 1:
			note = " (1 warning)"
		default:
			note = fmt.Sprintf(" (%d warnings)", len(warns))
		}
		if h := HeldElsewhere(ctx, cfg); h != "" {
			note += " (runs on " + h + ": checked with a session of its own)"
		}
		fmt.Fprintf(w, "ok   shop %s%s\n", id, note)
		for _, l := range warns {
			fmt.Fprintln(w, "     "+l) // named, not only counted
		}
	}
	return passed
}

// warnLines are the WARN lines of a check's report.
func warnLines(report string) []string {
	var out []string
	for l := range strings.Lines(report) {
		if strings.HasPrefix(l, "WARN ") {
			out = append(out, strings.TrimRight(l, "\n"))
		}
	}
	return out
}

// fleetHints rewrites the single-shop advice of a check's report for a
// shop of the fleet (whose state file is not a variable of its own).
func fleetHints(report, id string) string {
	return strings.ReplaceAll(report, pipeline.TryCredentials, "watcher check -shop "+id+" -login, which opens one more session")
}

// CheckShop is `watcher check -shop ID` of a fleet: the shop's names, a
// warning when another member runs it, then pipeline.Check of its
// configuration (cfg, from ShopConfig). login: a session of check's own
// (no stored session reused), so that the shop's credentials are tried.
func CheckShop(ctx context.Context, cfg *pipeline.Config, base *pipeline.Config, login bool, version string, w io.Writer) bool {
	id := cfg.ShopID
	fmt.Fprintf(w, "ok   shop %s of %s: state file %s, subjects %s.>, stream %s\n", id, base.ShopsFile, cfg.StatePath, cfg.SubjectPrefix, cfg.Stream)
	if h := HeldElsewhere(ctx, cfg); h != "" {
		fmt.Fprintf(w, "WARN %s runs shop %s, not this member: the login below is a session of its own (check on %s asks it instead)\n", h, id, h)
	}
	if login {
		c := *cfg
		c.StatePath = "" // no stored session: a login of its own tries the credentials
		cfg = &c
		fmt.Fprintf(w, "ok   -login: the credentials of shop %s are tried with a session of check's own (one more session for the shop)\n", id)
	}
	var out bytes.Buffer
	passed := pipeline.Check(ctx, cfg, version, &out)
	io.WriteString(w, fleetHints(out.String(), id))
	return passed
}

// firstFailure is the first FAIL line of a check's report, as an error.
func firstFailure(report io.Reader) error {
	sc := bufio.NewScanner(report)
	for sc.Scan() {
		if why, ok := strings.CutPrefix(sc.Text(), "FAIL "); ok {
			return errors.New(why)
		}
	}
	return errors.New("failed")
}
