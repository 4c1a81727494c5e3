package diff

import (
	"encoding/json"
	"net/url"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// FuzzDecide decides an arbitrary entry against an arbitrary previous state
// (itself decoded from an entry): Decide never panics, is deterministic and
// idempotent, never emits an event older than the snapshot, and every event
// encodes to valid JSON under a valid subject.
func FuzzDecide(f *testing.F) {
	entries := fixtureEntries(f)
	for i, e := range entries {
		prev := entries[(i+1)%len(entries)]
		f.Add([]byte(e), []byte(prev), true, int64(1795302000), uint8(i))
		f.Add([]byte(e), []byte(e), true, int64(0), uint8(0xff))
		f.Add([]byte(e), []byte(nil), false, int64(1763000000), uint8(i*3))
	}
	f.Add([]byte(`{"id":1,"updatedAt":"2026-01-01T00:00:00Z","statusId":"1e3","lockStatus":"\u0000\"","ownerId":12.50}`),
		[]byte(`{"id":1,"updatedAt":"2026-01-01T00:00:00+14:00","statusId":-0}`), true, int64(-62135596800), uint8(5))
	f.Fuzz(func(t *testing.T, raw, prevRaw []byte, hasPrev bool, baselineUnix int64, flags uint8) {
		o, err := order.DecodeOrder(raw)
		if err != nil {
			return
		}
		var prev *State
		if hasPrev {
			po, err := order.DecodeOrder(prevRaw)
			if err != nil {
				return
			}
			s := StateOf(po)
			prev = &s
		}
		opt := Options{
			InBaseline:   flags&1 != 0,
			EmitBaseline: flags&2 != 0,
			EmitUpdated:  flags&4 != 0,
		}
		if flags&8 == 0 {
			opt.Baseline = time.Unix(baselineUnix, 0)
		}
		if flags&16 != 0 {
			opt.Scope = fuzzScope
		}
		next, store, events := Decide(prev, o, opt)
		next2, store2, events2 := Decide(prev, o, opt)
		if store != store2 || !reflect.DeepEqual(next, next2) || !reflect.DeepEqual(events, events2) {
			t.Fatalf("not deterministic")
		}
		stale := prev != nil && o.UpdatedAt.Before(prev.UpdatedAt.Time)
		if stale && (store || len(events) != 0) {
			t.Fatalf("stale entry stored=%v events=%v", store, events)
		}
		if prev == nil && !store && opt.Scope.Match(o.ID, &next) {
			t.Fatalf("first sight in scope not stored")
		}
		if opt.Scope != nil && len(events) > 0 && !opt.Scope.Match(o.ID, &next) && (prev == nil || !opt.Scope.Match(o.ID, prev)) {
			t.Fatalf("events of a change out of scope on both sides: %v", events)
		}
		if len(events) > 0 && !store {
			t.Fatalf("events without a store: %v", events)
		}
		if store {
			if _, again, evs := Decide(&next, o, opt); again || len(evs) != 0 {
				t.Fatalf("not idempotent: store=%v events=%v", again, evs)
			}
		}
		seen := map[string]bool{}
		for _, e := range events {
			if e.Before != nil && e.After.UpdatedAt.Before(e.Before.UpdatedAt.Time) {
				t.Fatalf("%s: stale event: after %v before %v", e.Type, e.After.UpdatedAt, e.Before.UpdatedAt)
			}
			if prev != nil && e.After.UpdatedAt.Before(prev.UpdatedAt.Time) {
				t.Fatalf("%s: event older than the snapshot", e.Type)
			}
			if len(e.ID) != 32 || strings.Trim(e.ID, "0123456789abcdef") != "" || seen[e.ID] {
				t.Fatalf("%s: bad or repeated id %q", e.Type, e.ID)
			}
			seen[e.ID] = true
			if err := ValidPrefix(e.Subject("orders")); err != nil {
				t.Fatalf("%s: subject %q: %v", e.Type, e.Subject("orders"), err)
			}
			b := Encode(nil, e, "https://shop.example/\x00\"")
			checkEncoded(t, e, b)
			var back struct {
				Data struct {
					Order json.RawMessage `json:"order"`
				} `json:"data"`
			}
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("%s: %v", e.Type, err)
			}
		}
		// State.MarshalJSON is valid JSON for any state.
		if b, err := json.Marshal(next); err != nil || !json.Valid(b) {
			t.Fatalf("state JSON %s: %v", b, err)
		}
	})
}

// fuzzScope is statusId=in:5,6 and lockStatus=unlocked, evaluated locally.
var fuzzScope = func() *Scope {
	s, _ := localGroup(&order.Group{Fields: []order.Filter{
		order.In("statusId", order.Dec(order.MustDecimal("5")), order.Dec(order.MustDecimal("6"))),
		order.Eq("lockStatus", order.Str("unlocked")),
	}}, 0)
	return s
}()

// FuzzSplitScope splits an arbitrary scope (simple filters in query form and
// a complex group): whatever SplitScope accepts, the part sent is a valid
// query of fields that never change only, every condition can be evaluated
// locally, and an order is in the split scope (sent part and local part)
// exactly when it is in the whole scope.
func FuzzSplitScope(f *testing.F) {
	entries := fixtureEntries(f)
	for i, e := range entries {
		f.Add("orderTypeId=1&statusId=in:5,6", []byte(nil), []byte(e))
		f.Add("lockStatus=unlocked", []byte(`{"conditionType":"or","fields":[{"field":"referrerId","operator":"in","value":[1,4.01]},{"field":"statusId","operator":"gte","value":5}]}`), []byte(entries[(i+1)%len(entries)]))
		f.Add("", []byte(`{"conditionType":"and","fields":[{"field":"ownerId","operator":"null","value":null}],"groups":[{"conditionType":"or","fields":[{"field":"orderTypeId","operator":"eq","value":1},{"field":"createdAt","operator":"lt","value":"2026-11-20T11:40:18+01:00"}]}]}`), []byte(e))
		f.Add("plentyId=41523&orderId=between:1,3000&referrerId=4.01", []byte(`{"fields":[{"field":"locationId","operator":"nin","value":["2"]}]}`), []byte(e))
	}
	f.Fuzz(func(t *testing.T, query string, body, raw []byte) {
		vals, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		var fs []order.Filter
		for name, vs := range vals {
			if len(vs) != 1 {
				return
			}
			fl, err := order.ParseFilter(name, vs[0])
			if err != nil {
				return
			}
			fs = append(fs, fl)
		}
		sort.Slice(fs, func(i, j int) bool { return fs[i].Field < fs[j].Field })
		if (order.Query{Filters: fs}).Validate() != nil {
			return
		}
		var g *order.Group
		if len(body) > 0 {
			if g, err = order.ParseGroup(body); err != nil {
				return
			}
		}
		sp, err := SplitScope(fs, g)
		if err != nil {
			return
		}
		if err := (order.Query{Filters: sp.Sent, Complex: sp.SentGroup}).Validate(); err != nil {
			t.Fatalf("the part sent is not a valid query: %v", err)
		}
		sentAll := &order.Group{Fields: sp.Sent}
		if sp.SentGroup != nil {
			sentAll.Groups = []*order.Group{sp.SentGroup}
		}
		var sentFields func(g *order.Group)
		sentFields = func(g *order.Group) {
			for _, fl := range g.Fields {
				if c, _ := ClassifyScopeField(fl.Field); c != ScopeSent {
					t.Fatalf("%s sent to the service: it may change", fl.Field)
				}
			}
			for _, sub := range g.Groups {
				sentFields(sub)
			}
		}
		sentFields(sentAll)
		whole := &order.Group{Fields: fs}
		if g != nil {
			whole.Groups = []*order.Group{g}
		}
		all, err := localGroup(whole, 0)
		if err != nil {
			t.Fatalf("accepted but not evaluable: %v", err)
		}
		sent, err := localGroup(sentAll, 0)
		if err != nil {
			t.Fatal(err)
		}
		o, err := order.DecodeOrder(raw)
		if err != nil {
			return
		}
		s := StateOf(o)
		if want, got := all.Match(o.ID, &s), sent.Match(o.ID, &s) && sp.Local.Match(o.ID, &s); want != got {
			t.Fatalf("whole scope %v, split scope %v (sent %+v, local %s)", want, got, sentAll, sp.Local)
		}
	})
}
