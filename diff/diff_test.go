package diff

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// baseEntry is a typical entry of the order search; tests override fields.
var baseEntry = map[string]string{
	"id":               `2302`,
	"referrerId":       `4.01`,
	"roundTotalsOnly":  `true`,
	"numberOfDecimals": `2`,
	"plentyId":         `41523`,
	"typeId":           `1`,
	"lockStatus":       `"unlocked"`,
	"locationId":       `"1"`,
	"createdAt":        `"2026-11-20T11:40:17+01:00"`,
	"updatedAt":        `"2026-11-22T10:02:41+01:00"`,
	"statusId":         `5`,
	"ownerId":          `"3"`,
}

// entry builds an entry from baseEntry with overrides "key=rawJSON"; a
// "key=" override removes the key.
func entry(t testing.TB, overrides ...string) order.Order {
	t.Helper()
	m := map[string]json.RawMessage{}
	for k, v := range baseEntry {
		m[k] = json.RawMessage(v)
	}
	for _, o := range overrides {
		k, v, ok := strings.Cut(o, "=")
		if !ok {
			t.Fatalf("override %q: want key=value", o)
		}
		if v == "" {
			delete(m, k)
			continue
		}
		m[k] = json.RawMessage(v)
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatalf("entry %v: %v", overrides, err)
	}
	o, err := order.DecodeOrder(raw)
	if err != nil {
		t.Fatalf("decode entry %s: %v", raw, err)
	}
	return o
}

func stateOf(t testing.TB, overrides ...string) *State {
	t.Helper()
	s := StateOf(entry(t, overrides...))
	return &s
}

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestDecide is the table of decisions, after alertmanager's
// TestDedupStageNeedsUpdate: one row per situation.
func TestDecide(t *testing.T) {
	baseline := mustTime(t, "2026-11-21T00:00:00+01:00")
	after := Options{Baseline: baseline}
	for _, tc := range []struct {
		name      string
		prev      *State
		entry     []string // overrides of baseEntry
		opt       Options
		wantStore bool
		want      []Type
	}{
		// First sight.
		{name: "first sight after baseline, created after baseline point", entry: []string{`createdAt="2026-11-21T00:00:01+01:00"`}, opt: after, wantStore: true, want: []Type{Created}},
		{name: "first sight after baseline, created before baseline point", opt: after, wantStore: true, want: []Type{Discovered}},
		{name: "created exactly at the baseline point is discovered", entry: []string{`createdAt="2026-11-21T00:00:00+01:00"`}, opt: after, wantStore: true, want: []Type{Discovered}},
		{name: "created one second after the baseline point in another offset", entry: []string{`createdAt="2026-11-20T23:00:01Z"`}, opt: after, wantStore: true, want: []Type{Created}},
		{name: "created at the baseline point in another offset", entry: []string{`createdAt="2026-11-20T23:00:00Z"`}, opt: after, wantStore: true, want: []Type{Discovered}},
		{name: "PHP zero createdAt is discovered", entry: []string{`createdAt="-0001-11-30T00:00:00+01:00"`}, opt: after, wantStore: true, want: []Type{Discovered}},
		{name: "null createdAt is discovered", entry: []string{`createdAt=null`}, opt: after, wantStore: true, want: []Type{Discovered}},
		{name: "absent createdAt is discovered", entry: []string{`createdAt=`}, opt: after, wantStore: true, want: []Type{Discovered}},
		{name: "unknown baseline: discovered, never created", entry: []string{`createdAt="2030-01-01T00:00:00+01:00"`}, opt: Options{}, wantStore: true, want: []Type{Discovered}},
		{name: "baseline sweep is silent", entry: []string{`createdAt="2026-11-21T00:00:01+01:00"`}, opt: Options{Baseline: baseline, InBaseline: true}, wantStore: true},
		{name: "baseline sweep is silent even with EmitUpdated", opt: Options{Baseline: baseline, InBaseline: true, EmitUpdated: true}, wantStore: true},
		{name: "baseline sweep with EmitBaseline: discovered", opt: Options{Baseline: baseline, InBaseline: true, EmitBaseline: true}, wantStore: true, want: []Type{Discovered}},
		{name: "baseline sweep with EmitBaseline: created after the point", entry: []string{`createdAt="2026-11-21T00:00:01+01:00"`}, opt: Options{Baseline: baseline, InBaseline: true, EmitBaseline: true}, wantStore: true, want: []Type{Created}},
		{name: "no status or lock event on first sight", entry: []string{`statusId=7`, `lockStatus="permanentlyLocked"`}, opt: Options{Baseline: baseline, EmitUpdated: true}, wantStore: true, want: []Type{Discovered}},

		// Known order.
		{name: "unchanged", prev: stateOf(t), opt: after},
		{name: "unchanged with EmitUpdated", prev: stateOf(t), opt: Options{Baseline: baseline, EmitUpdated: true}},
		{name: "unchanged in the baseline sweep", prev: stateOf(t), opt: Options{Baseline: baseline, InBaseline: true}},
		{name: "status changed", prev: stateOf(t), entry: []string{`statusId=6`, `updatedAt="2026-11-22T10:05:00+01:00"`}, opt: after, wantStore: true, want: []Type{StatusChanged}},
		{name: "status changed during the baseline sweep (rescan) is reported", prev: stateOf(t), entry: []string{`statusId=6`, `updatedAt="2026-11-22T10:05:00+01:00"`}, opt: Options{Baseline: baseline, InBaseline: true}, wantStore: true, want: []Type{StatusChanged}},
		{name: "lock changed", prev: stateOf(t), entry: []string{`lockStatus="permanentlyLocked"`, `updatedAt="2026-11-22T10:05:00+01:00"`}, opt: after, wantStore: true, want: []Type{LockChanged}},
		{name: "status and lock changed: status first", prev: stateOf(t), entry: []string{`statusId=7`, `lockStatus="reversibleLocked"`, `updatedAt="2026-11-22T10:05:00+01:00"`}, opt: after, wantStore: true, want: []Type{StatusChanged, LockChanged}},
		{name: "status, lock and updated", prev: stateOf(t), entry: []string{`statusId=7`, `lockStatus="reversibleLocked"`, `updatedAt="2026-11-22T10:05:00+01:00"`}, opt: Options{Baseline: baseline, EmitUpdated: true}, wantStore: true, want: []Type{StatusChanged, LockChanged, Updated}},
		{name: "lock absent now", prev: stateOf(t), entry: []string{`lockStatus=`, `updatedAt="2026-11-22T10:05:00+01:00"`}, opt: after, wantStore: true, want: []Type{LockChanged}},
		{name: "decimal status 5.1 -> 5.10 is equal", prev: stateOf(t, `statusId=5.1`), entry: []string{`statusId=5.10`}, opt: after},
		{name: "decimal string status equals number", prev: stateOf(t, `statusId=5.7`), entry: []string{`statusId="5.7"`}, opt: after},
		{name: "string status 5.7 -> number 5.71", prev: stateOf(t, `statusId="5.7"`), entry: []string{`statusId=5.71`}, opt: after, wantStore: true, want: []Type{StatusChanged}},
		{name: "status 5 -> 5.0 is equal", prev: stateOf(t), entry: []string{`statusId=5.0`}, opt: after},
		{name: "status appears", prev: stateOf(t, `statusId=null`), entry: []string{`statusId=5`}, opt: after, wantStore: true, want: []Type{StatusChanged}},
		{name: "status disappears", prev: stateOf(t), entry: []string{`statusId=`}, opt: after, wantStore: true, want: []Type{StatusChanged}},
		{name: "stale entry with another status", prev: stateOf(t, `statusId=6`, `updatedAt="2026-11-22T10:05:00+01:00"`), entry: []string{`statusId=5`}, opt: Options{Baseline: baseline, EmitUpdated: true}},
		{name: "stale by one second", prev: stateOf(t, `updatedAt="2026-11-22T10:02:42+01:00"`), entry: []string{`lockStatus="permanentlyLocked"`}, opt: after},
		{name: "stale in another offset", prev: stateOf(t, `updatedAt="2026-11-22T09:02:42Z"`), entry: []string{`statusId=8`}, opt: after},
		{name: "equal updatedAt with a status change (two updates in one second)", prev: stateOf(t), entry: []string{`statusId=6`}, opt: Options{Baseline: baseline, EmitUpdated: true}, wantStore: true, want: []Type{StatusChanged}},
		{name: "equal updatedAt in another offset is not stale", prev: stateOf(t), entry: []string{`statusId=6`, `updatedAt="2026-11-22T09:02:41Z"`}, opt: after, wantStore: true, want: []Type{StatusChanged}},
		{name: "updatedAt advanced only: stored, silent", prev: stateOf(t), entry: []string{`updatedAt="2026-11-22T10:05:00+01:00"`}, opt: after, wantStore: true},
		{name: "updatedAt advanced only with EmitUpdated", prev: stateOf(t), entry: []string{`updatedAt="2026-11-22T10:05:00+01:00"`}, opt: Options{Baseline: baseline, EmitUpdated: true}, wantStore: true, want: []Type{Updated}},
		{name: "other tracked field changed: stored, silent", prev: stateOf(t), entry: []string{`ownerId="4"`}, opt: Options{Baseline: baseline, EmitUpdated: true}, wantStore: true},
		{name: "referrer 4.01 -> 4.010 is equal", prev: stateOf(t), entry: []string{`referrerId="4.010"`}, opt: after},
		{name: "locationId number vs string is equal", prev: stateOf(t), entry: []string{`locationId=1`}, opt: after},
		{name: "createdAt becomes zero: stored, silent", prev: stateOf(t), entry: []string{`createdAt="-0001-11-30T00:00:00+01:00"`}, opt: after, wantStore: true},
		{name: "untracked field changed", prev: stateOf(t), entry: []string{`roundTotalsOnly=false`}, opt: Options{Baseline: baseline, EmitUpdated: true}},
		{name: "same instant, new offset: stored, silent", prev: stateOf(t), entry: []string{`updatedAt="2026-11-22T09:02:41Z"`}, opt: Options{Baseline: baseline, EmitUpdated: true}, wantStore: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := entry(t, tc.entry...)
			var prevCopy State
			if tc.prev != nil {
				prevCopy = *tc.prev
			}
			next, store, events := Decide(tc.prev, o, tc.opt)
			if store != tc.wantStore {
				t.Errorf("store = %v, want %v", store, tc.wantStore)
			}
			var got []Type
			for _, e := range events {
				got = append(got, e.Type)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("events = %v, want %v", got, tc.want)
			}
			stale := tc.prev != nil && o.UpdatedAt.Before(tc.prev.UpdatedAt.Time)
			switch {
			case stale && !reflect.DeepEqual(next, *tc.prev):
				t.Errorf("stale: next = %+v, want the previous state", next)
			case !stale && !reflect.DeepEqual(next, StateOf(o)):
				t.Errorf("next = %+v, want the entry's state", next)
			}
			if tc.prev != nil && !reflect.DeepEqual(*tc.prev, prevCopy) {
				t.Errorf("Decide modified prev")
			}
			for _, e := range events {
				if e.OrderID != o.ID || string(e.Order) != string(o.Raw) || !reflect.DeepEqual(e.After, StateOf(o)) {
					t.Errorf("%s: order id, raw entry or after state wrong: %+v", e.Type, e)
				}
				if (e.Before == nil) != (tc.prev == nil) {
					t.Errorf("%s: before = %v with prev = %v", e.Type, e.Before, tc.prev)
				}
				if e.Before != nil && !reflect.DeepEqual(*e.Before, *tc.prev) {
					t.Errorf("%s: before = %+v, want %+v", e.Type, *e.Before, *tc.prev)
				}
				if len(e.ID) != 32 {
					t.Errorf("%s: id %q is not 32 hex characters", e.Type, e.ID)
				}
			}
			// Deciding again on what was stored changes nothing.
			if store {
				if _, again, evs := Decide(&next, o, tc.opt); again || len(evs) != 0 {
					t.Errorf("second decision on the stored state: store=%v events=%v", again, evs)
				}
			}
		})
	}
}

func TestDecideBeforeIsACopy(t *testing.T) {
	prev := stateOf(t)
	_, _, events := Decide(prev, entry(t, `statusId=6`, `lockStatus="x"`), Options{})
	if len(events) != 2 {
		t.Fatalf("events = %v", events)
	}
	prev.StatusID = order.MustDecimal("99")
	for _, e := range events {
		if e.Before.StatusID.String() != "5" {
			t.Errorf("%s: before changed with the caller's prev: %v", e.Type, e.Before.StatusID)
		}
	}
}

func TestEventID(t *testing.T) {
	ts := mustTime(t, "2026-11-22T10:02:41+01:00")
	bt := ts.Add(-time.Hour)
	base := EventID(2302, StatusChanged, "5", "6", bt, ts)
	if len(base) != 32 || strings.Trim(base, "0123456789abcdef") != "" {
		t.Fatalf("id %q: want 32 lower-case hex characters", base)
	}
	// Fixed value: the id must not change between releases (JetStream dedup
	// across an upgrade). Update only together with idDomain and IDScheme.
	if want := EventID(2302, StatusChanged, "5", "6", bt, ts); base != want {
		t.Fatalf("not deterministic: %s vs %s", base, want)
	}
	if got, want := base, pinnedID; got != want {
		t.Errorf("EventID(2302, status_changed, 5, 6, %s, %s) = %s, want pinned %s", bt, ts, got, want)
	}
	// The same instants in another offset are the same event.
	if got := EventID(2302, StatusChanged, "5", "6", bt.UTC(), ts.UTC()); got != base {
		t.Errorf("offset changed the id: %s vs %s", got, base)
	}
	seen := map[string]string{base: "base"}
	for name, id := range map[string]string{
		"order id":          EventID(2303, StatusChanged, "5", "6", bt, ts),
		"type":              EventID(2302, LockChanged, "5", "6", bt, ts),
		"before":            EventID(2302, StatusChanged, "5.1", "6", bt, ts),
		"after":             EventID(2302, StatusChanged, "5", "6.1", bt, ts),
		"updatedAt":         EventID(2302, StatusChanged, "5", "6", bt, ts.Add(time.Second)),
		"updatedAt nanos":   EventID(2302, StatusChanged, "5", "6", bt, ts.Add(time.Nanosecond)),
		"before.updatedAt":  EventID(2302, StatusChanged, "5", "6", ts, ts),
		"no before":         EventID(2302, StatusChanged, "5", "6", time.Time{}, ts),
		"times swapped":     EventID(2302, StatusChanged, "5", "6", ts, bt),
		"shift before":      EventID(2302, StatusChanged, "56", "", bt, ts),
		"shift after":       EventID(2302, StatusChanged, "", "56", bt, ts),
		"swap":              EventID(2302, StatusChanged, "6", "5", bt, ts),
		"negative id":       EventID(-2302, StatusChanged, "5", "6", bt, ts),
		"empty":             EventID(0, "", "", "", time.Time{}, time.Time{}),
		"type into value":   EventID(2302, "order.status_changed5", "", "6", bt, ts),
		"epoch, not absent": EventID(2302, StatusChanged, "5", "6", time.Unix(0, 0), ts),
	} {
		if prev, dup := seen[id]; dup {
			t.Errorf("%s: same id as %s: %s", name, prev, id)
		}
		seen[id] = name
	}
}

// pinnedID is EventID(2302, StatusChanged, "5", "6", 2026-11-22T09:02:41+01:00,
// 2026-11-22T10:02:41+01:00) in id scheme 2.
const pinnedID = "4e382c6994d191c04703e9993914d736"

// TestEventIDsOfFlapping: 5 -> 6, 6 -> 5, 5 -> 6 within one second of the
// service's clock are three transitions with three ids (scheme 1 gave the
// third the first's id, and JetStream dropped it as a duplicate); deciding
// them again gives the same ids.
func TestEventIDsOfFlapping(t *testing.T) {
	prev := stateOf(t, `updatedAt="2026-11-22T08:00:00Z"`)
	steps := []string{"6", "5", "6"}
	decide := func() []string {
		cur := *prev
		var ids []string
		for _, st := range steps {
			o := entry(t, "statusId="+st, `updatedAt="2026-11-22T10:02:41+01:00"`)
			next, store, events := Decide(&cur, o, Options{})
			if !store || len(events) != 1 || events[0].Type != StatusChanged {
				t.Fatalf("-> %s: store %v events %+v", st, store, events)
			}
			ids = append(ids, events[0].ID)
			cur = next
		}
		return ids
	}
	ids := decide()
	if ids[0] == ids[2] || ids[0] == ids[1] || ids[1] == ids[2] {
		t.Errorf("ids of 5->6, 6->5, 5->6 within one second: %v, want three distinct", ids)
	}
	if again := decide(); !reflect.DeepEqual(again, ids) {
		t.Errorf("decided again: %v, want %v", again, ids)
	}
}

func TestEventIDsOfDecide(t *testing.T) {
	// Events of different changes of the same order never share an id; the
	// same change decided twice (another process, a rescan) has the same id.
	prev := stateOf(t)
	opt := Options{EmitUpdated: true}
	entries := [][]string{
		{`statusId=6`},
		{`statusId=6`, `updatedAt="2026-11-22T10:02:42+01:00"`},
		{`statusId=6.1`},
		{`lockStatus="permanentlyLocked"`},
		{`lockStatus="permanentlyLocked"`, `statusId=6.2`},
		{`lockStatus="reversibleLocked"`, `updatedAt="2026-11-22T10:02:44+01:00"`},
		{`updatedAt="2026-11-22T10:02:42+01:00"`},
		{`updatedAt="2026-11-22T10:02:43+01:00"`},
		{`id=2303`, `statusId=6`},
	}
	seen := map[string]string{} // id -> key
	for _, ov := range entries {
		_, _, a := Decide(prev, entry(t, ov...), opt)
		_, _, b := Decide(stateOf(t), entry(t, ov...), opt)
		if len(a) == 0 || !reflect.DeepEqual(a, b) {
			t.Fatalf("%v: not deterministic or no events: %v vs %v", ov, a, b)
		}
		for _, e := range a {
			// What the event is about; equal keys must give equal ids.
			key := fmt.Sprintf("%d %s %s>%s", e.OrderID, e.Type, e.Before.UpdatedAt, e.After.UpdatedAt)
			switch e.Type {
			case StatusChanged:
				key = fmt.Sprintf("%d %s %s>%s @%d", e.OrderID, e.Type, e.Before.StatusID.Canonical(), e.After.StatusID.Canonical(), e.After.UpdatedAt.Unix())
			case LockChanged:
				key = fmt.Sprintf("%d %s %s>%s @%d", e.OrderID, e.Type, e.Before.LockStatus, e.After.LockStatus, e.After.UpdatedAt.Unix())
			}
			if other, dup := seen[e.ID]; dup && other != key {
				t.Errorf("%s and %s share id %s", key, other, e.ID)
			}
			seen[e.ID] = key
		}
	}
	// The id is about one change: the status change 5 -> 6 at one updatedAt
	// is the same event whether or not the lock changed with it.
	_, _, alone := Decide(prev, entry(t, `statusId=6`), Options{})
	_, _, with := Decide(prev, entry(t, `statusId=6`, `lockStatus="permanentlyLocked"`), Options{})
	if alone[0].ID != with[0].ID || with[1].ID == alone[0].ID {
		t.Errorf("status change alone %v, with a lock change %v", alone, with)
	}
	// created and discovered of the same entry differ.
	o := entry(t)
	_, _, c := Decide(nil, o, Options{Baseline: mustTime(t, "2026-11-01T00:00:00Z")})
	_, _, d := Decide(nil, o, Options{Baseline: mustTime(t, "2026-11-30T00:00:00Z")})
	if c[0].Type != Created || d[0].Type != Discovered || c[0].ID == d[0].ID {
		t.Errorf("created %v / discovered %v", c, d)
	}
}

func TestSubject(t *testing.T) {
	prev := stateOf(t, `statusId=5.1`)
	for _, tc := range []struct {
		name string
		ev   Event
		want string
	}{
		{"created", Event{Type: Created, OrderID: 2302}, "orders.created.2302"},
		{"discovered", Event{Type: Discovered, OrderID: 2302}, "orders.discovered.2302"},
		{"lock", Event{Type: LockChanged, OrderID: 2302, Before: prev}, "orders.lock_changed.2302"},
		{"updated", Event{Type: Updated, OrderID: 2302, Before: prev}, "orders.updated.2302"},
		{"status decimals", Event{Type: StatusChanged, OrderID: 2302, Before: prev, After: *stateOf(t, `statusId=8`)}, "orders.status_changed.5_1.8.2302"},
		{"status canonical", Event{Type: StatusChanged, OrderID: 7, Before: stateOf(t, `statusId="05.10"`), After: *stateOf(t, `statusId=11.10`)}, "orders.status_changed.5_1.11_1.7"},
		{"status absent before", Event{Type: StatusChanged, OrderID: 7, Before: stateOf(t, `statusId=null`), After: *stateOf(t, `statusId=6`)}, "orders.status_changed.none.6.7"},
		{"status absent after", Event{Type: StatusChanged, OrderID: 7, Before: prev, After: *stateOf(t, `statusId=`)}, "orders.status_changed.5_1.none.7"},
		{"status without before", Event{Type: StatusChanged, OrderID: 7, After: *stateOf(t, `statusId=6`)}, "orders.status_changed.none.6.7"},
		{"status exponent", Event{Type: StatusChanged, OrderID: 7, Before: stateOf(t, `statusId=1e1`), After: *stateOf(t, `statusId=-0.5`)}, "orders.status_changed.10.-0_5.7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ev.Subject("orders"); got != tc.want {
				t.Errorf("Subject = %q, want %q", got, tc.want)
			}
			if got := tc.ev.Subject("acme.shop1"); got != "acme.shop1"+strings.TrimPrefix(tc.want, "orders") {
				t.Errorf("Subject(acme.shop1) = %q", got)
			}
			if err := ValidPrefix(tc.ev.Subject("orders")); err != nil {
				t.Errorf("subject is not a valid literal subject: %v", err)
			}
		})
	}
}

func TestValidPrefix(t *testing.T) {
	for _, ok := range []string{"orders", "acme.orders", "a-b_c.d1", "$ORDERS.x", "bestellungen.ü"} {
		if err := ValidPrefix(ok); err != nil {
			t.Errorf("ValidPrefix(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "orders.", ".orders", "a..b", "or ders", "orders\t", "orders\n", "orders.*", "orders.>", "ord*ers", "a>b", "\xff", "a\x00b", "a\u00a0b"} {
		if err := ValidPrefix(bad); err == nil {
			t.Errorf("ValidPrefix(%q) = nil, want an error", bad)
		}
	}
}

// fixtureEntries returns every entry of the plenty search page fixtures.
func fixtureEntries(t testing.TB) []json.RawMessage {
	t.Helper()
	files, err := filepath.Glob("../plenty/testdata/search-page*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v (%d files)", err, len(files))
	}
	sort.Strings(files)
	var out []json.RawMessage
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Entries []json.RawMessage `json:"entries"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, page.Entries...)
	}
	return out
}
