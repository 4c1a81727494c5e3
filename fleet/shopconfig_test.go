package fleet

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/orderwatch/orderwatch/shops"
)

// TestRegistryShopConfigIsTheMembers: the configuration the commands get
// for a shop (Registry.ShopConfig) is the one a member builds to run it
// (shopConfig), but for the address where that member serves the shop; an
// unknown id lists the known ones, an invalid entry gives its reason.
func TestRegistryShopConfigIsTheMembers(t *testing.T) {
	dir := t.TempDir()
	b := base("nats://127.0.0.1:1")
	b.ShopsFile, b.StateDir, b.InstanceID, b.HTTPAddr = filepath.Join(dir, "shops.json"), filepath.Join(dir, "state"), "m1", ":9090"
	getenv := func(k string) string { return map[string]string{"PW": "secret"}[k] }
	if err := shops.WriteFile(b.ShopsFile, []shops.Shop{
		{ID: "paris", URL: "https://paris.example", Username: "api", PasswordEnv: "PW", Stream: "PARIS", SubjectPrefix: "paris"}, // a stream of its own needs subjects outside the fleet stream's
		{ID: "berlin", URL: "https://berlin.example", Username: "api", PasswordEnv: "PW", CallShare: 0.1},
		{ID: "rome", URL: "https://rome.example", Username: "api", PasswordEnv: "UNSET"},
	}); err != nil {
		t.Fatal(err)
	}
	reg, err := ReadRegistry(&b, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if got := reg.Known(); got != "berlin, paris" || len(reg.Invalid) != 1 {
		t.Fatalf("known %q, invalid %v", got, reg.Invalid)
	}
	member := &Fleet{cfg: Config{Base: b, StateDir: b.StateDir, Instance: "m1", Getenv: getenv}}
	for _, s := range reg.Shops {
		got, err := reg.ShopConfig(s.ID)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := member.shopConfig(s)
		if got.HTTPAddr != ":9090/shops/"+s.ID {
			t.Errorf("%s: HTTPAddr %q", s.ID, got.HTTPAddr)
		}
		got.HTTPAddr = want.HTTPAddr
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the commands' configuration differs from the member's:\n got %+v\nwant %+v", s.ID, got, want)
		}
	}
	if _, err := reg.ShopConfig("oslo"); err == nil || !strings.Contains(err.Error(), `shop "oslo" is not in `+b.ShopsFile+" (its shops: berlin, paris)") {
		t.Errorf("unknown shop: %v", err)
	}
	if _, err := reg.ShopConfig("rome"); err == nil || !strings.Contains(err.Error(), "invalid entry") || !strings.Contains(err.Error(), "UNSET") {
		t.Errorf("invalid entry: %v", err)
	}
	b.ShopsFile = ""
	if _, err := ReadRegistry(&b, getenv); err == nil {
		t.Error("ReadRegistry without WATCHER_SHOPS_FILE: no error")
	}
}

// TestHeldElsewhere: the member at a shop's address names the holder when
// it is another member, and nothing when it runs the shop itself or
// nobody answers.
func TestHeldElsewhere(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/state" {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(Report{Instance: "m1", Shops: []ShopReport{{ID: "a", Holder: "m1"}, {ID: "b", Holder: "m2"}, {ID: "c"}}})
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	for shop, want := range map[string]string{"a": "", "b": "m2", "c": ""} {
		c := base("")
		c.ShopID, c.HTTPAddr = shop, addr+shopPath(shop)
		if got := HeldElsewhere(t.Context(), &c); got != want {
			t.Errorf("shop %s: %q, want %q", shop, got, want)
		}
	}
	srv.Close()
	c := base("")
	c.ShopID, c.HTTPAddr = "b", addr+shopPath("b")
	if got := HeldElsewhere(t.Context(), &c); got != "" {
		t.Errorf("no member answering: %q", got)
	}
}
