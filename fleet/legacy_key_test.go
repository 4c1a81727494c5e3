package fleet

import (
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/shops"
)

// TestViewSeesAHolderUnderTheLegacyKey: a shop whose group still holds
// its lease under the key of an earlier version (lease.Key of the URL and
// the stream) is held, not free: no member starts a second pipeline for it.
func TestViewSeesAHolderUnderTheLegacyKey(t *testing.T) {
	now := time.Now()
	s := shops.Shop{ID: "acme", URL: "https://acme.plentymarkets-cloud01.com"}
	f := &Fleet{
		cfg:      Config{Instance: "m1", MemberTTL: 6 * time.Second, Base: pipeline.Config{Stream: "ORDERS", LeaseBucket: "orderwatch"}},
		registry: map[string]shops.Shop{s.ID: s},
		runs:     map[string]*run{}, stopping: map[*run]struct{}{}, members: map[string]Member{},
		freeAt: map[string]time.Time{}, cooldown: map[string]time.Time{},
		holders: map[string]lease.Value{
			lease.Key(s.URL, "ORDERS"): {Instance: "m2", Expires: now.Add(9 * time.Second)},
		},
	}
	if kc := f.baseKeyConfig(s); kc.GroupKey() == kc.LegacyGroupKey() {
		t.Fatalf("the test needs a legacy key that differs from the group key (%s)", kc.GroupKey())
	}
	v := f.viewLocked(now)
	if v.Holder["acme"] != "m2" {
		t.Errorf("holder of acme = %q, want m2 (its lease under the legacy key)", v.Holder["acme"])
	}
}
