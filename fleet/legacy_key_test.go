package fleet

import (
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/shopid"
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
		holders: map[string]holder{
			lease.Key(s.URL, "ORDERS"): {Value: lease.Value{Instance: "m2"}, seen: now},
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

// TestTwoEntriesOnOneURLAreTwoShops: one service split into two shops by
// scope, one of them keeping the id a single-shop release derived from
// the URL: the other's earlier-version key (lease.Key of the URL) is the
// first shop's own key. The second shop is not held because the first is.
func TestTwoEntriesOnOneURLAreTwoShops(t *testing.T) {
	now := time.Now()
	url := "https://acme.plentymarkets-cloud01.com"
	first := shops.Shop{ID: shopid.FromURL(url), URL: url}
	second := shops.Shop{ID: "acme-b2b", URL: url, Scope: "orderTypeId=2"}
	f := &Fleet{
		cfg:      Config{Instance: "m1", MemberTTL: 6 * time.Second, Base: pipeline.Config{Stream: "ORDERS", LeaseBucket: "orderwatch"}},
		registry: map[string]shops.Shop{first.ID: first, second.ID: second},
		runs:     map[string]*run{}, stopping: map[*run]struct{}{}, members: map[string]Member{},
		freeAt: map[string]time.Time{}, cooldown: map[string]time.Time{},
		holders: map[string]holder{
			lease.Key(first.ID, "ORDERS"): {Value: lease.Value{Instance: "m2"}, seen: now},
		},
	}
	if f.baseKeyConfig(second).LegacyGroupKey() != f.baseKeyConfig(first).GroupKey() {
		t.Fatal("the test needs the second shop's earlier-version key to be the first shop's key")
	}
	v := f.viewLocked(now)
	if v.Holder[first.ID] != "m2" || v.Holder[second.ID] != "" {
		t.Errorf("holders %v, want %s held by m2 and %s free", v.Holder, first.ID, second.ID)
	}
}
