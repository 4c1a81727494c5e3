package diff

import (
	"strings"
	"testing"

	"github.com/orderwatch/orderwatch/plenty/order"
)

func mustFilter(t testing.TB, field, raw string) order.Filter {
	t.Helper()
	f, err := order.ParseFilter(field, raw)
	if err != nil {
		t.Fatalf("%s=%s: %v", field, raw, err)
	}
	return f
}

func mustGroup(t testing.TB, body string) *order.Group {
	t.Helper()
	g, err := order.ParseGroup([]byte(body))
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return g
}

func TestSplitScope(t *testing.T) {
	for _, tc := range []struct {
		name      string
		simple    [][2]string
		group     string
		sent      string // FilterString of the simple filters sent, " & "-joined
		sentGroup bool
		local     string // Scope.String()
		err       string
	}{
		{name: "empty"},
		{name: "status is local", simple: [][2]string{{"statusId", "in:5,6"}}, local: "statusId=in:5,6"},
		{name: "type is sent", simple: [][2]string{{"orderTypeId", "1"}}, sent: "orderTypeId=eq:1"},
		{name: "both", simple: [][2]string{{"orderTypeId", "1"}, {"statusId", "in:5,6"}, {"referrerId", "between:1,4.01"}, {"lockStatus", "unlocked"}},
			sent: "orderTypeId=eq:1 & referrerId=between:1,4.01", local: "statusId=in:5,6 and lockStatus=eq:unlocked"},
		{name: "undocumented fixed fields are local", simple: [][2]string{{"plentyId", "41523"}, {"ownerId", "not:7"}, {"locationId", "1"}},
			local: "plentyId=eq:41523 and ownerId=not:7 and locationId=eq:1"},
		{name: "created at is sent", simple: [][2]string{{"createdAt", "gte:2026-01-01T00:00:00+01:00"}}, sent: "createdAt=gte:2026-01-01T00:00:00+01:00"},
		{name: "and group is split",
			group:     `{"conditionType":"and","fields":[{"field":"orderTypeId","operator":"eq","value":1},{"field":"statusId","operator":"in","value":[5,6]}]}`,
			sentGroup: true, local: "statusId=in:5,6"},
		{name: "or group mixing fixed and changing fields is local as a whole",
			group: `{"conditionType":"or","fields":[{"field":"orderTypeId","operator":"eq","value":1},{"field":"statusId","operator":"in","value":[5,6]}]}`,
			local: "orderTypeId=eq:1 or statusId=in:5,6"},
		{name: "or group of fixed fields is sent",
			group:     `{"conditionType":"or","fields":[{"field":"orderTypeId","operator":"eq","value":1},{"field":"referrerId","operator":"in","value":[1,4.01]}]}`,
			sentGroup: true},
		{name: "nested: the fixed or-group is sent, the mixed one local",
			simple: [][2]string{{"statusId", "gte:5"}},
			group: `{"conditionType":"and","groups":[` +
				`{"conditionType":"or","fields":[{"field":"orderTypeId","operator":"eq","value":1},{"field":"orderTypeId","operator":"eq","value":4}]},` +
				`{"conditionType":"or","fields":[{"field":"referrerId","operator":"eq","value":1},{"field":"lockStatus","operator":"not","value":"unlocked"}]}]}`,
			sentGroup: true, local: "statusId=gte:5 and (referrerId=eq:1 or lockStatus=not:unlocked)"},
		{name: "item filters are refused", simple: [][2]string{{"itemId", "7"}}, err: "itemId: it can change"},
		{name: "property filters are refused in groups",
			group: `{"conditionType":"and","fields":[{"field":"orderProperty_4","operator":"eq","value":"x"}]}`, err: "orderProperty_4"},
		{name: "relation filters are refused", simple: [][2]string{{"relationReference_contact_receiver", "7"}}, err: "relationReference_contact_receiver"},
		{name: "unknown names are refused", simple: [][2]string{{"statusID", "5"}}, err: "does not know this filter"},
		{name: "updatedAt is refused", group: `{"conditionType":"and","fields":[{"field":"updatedAt","operator":"gte","value":"2026-01-01T00:00:00+01:00"}]}`, err: "sweep sets updatedAt"},
		{name: "range on text", simple: [][2]string{{"lockStatus", "gt:a"}}, err: "no range operator"},
		{name: "not an integer", simple: [][2]string{{"plentyId", "abc"}}, err: "not an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var simple []order.Filter
			for _, kv := range tc.simple {
				simple = append(simple, mustFilter(t, kv[0], kv[1]))
			}
			var g *order.Group
			if tc.group != "" {
				g = mustGroup(t, tc.group)
			}
			sp, err := SplitScope(simple, g)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var sent []string
			for _, f := range sp.Sent {
				sent = append(sent, FilterString(f))
			}
			if got := strings.Join(sent, " & "); got != tc.sent {
				t.Errorf("sent %q, want %q", got, tc.sent)
			}
			if (sp.SentGroup != nil) != tc.sentGroup {
				t.Errorf("sent group %+v, want one: %v", sp.SentGroup, tc.sentGroup)
			}
			if sp.SentGroup != nil {
				if err := (order.Query{Filters: sp.Sent, Complex: sp.SentGroup}).Validate(); err != nil {
					t.Errorf("the part sent is not a valid query: %v", err)
				}
			}
			if got := sp.Local.String(); got != tc.local {
				t.Errorf("local %q, want %q", got, tc.local)
			}
		})
	}
}

func TestScopeMatch(t *testing.T) {
	st := stateOf(t) // status 5, unlocked, type 1, referrer 4.01, plentyId 41523, owner "3", location "1"
	noOwner := stateOf(t, `ownerId=null`, `statusId=5.1`)
	for _, tc := range []struct {
		field, raw string
		want       bool // on st
		wantNo     bool // on noOwner
	}{
		{"statusId", "in:5,6", true, false},
		{"statusId", "5.0", true, false},
		{"statusId", "between:5,5.1", true, true},
		{"statusId", "lt:5.1", true, false},
		{"statusId", "not:5", false, true},
		{"lockStatus", "unlocked", true, true},
		{"lockStatus", "not:unlocked", false, false},
		{"ownerId", "3", true, false},
		{"ownerId", "not:3", false, true}, // nothing is equal to an absent value
		{"ownerId", "in:3,4", true, false},
		{"orderTypeId", "1", true, true},
		{"orderTypeId", "gt:1", false, false},
		{"referrerId", "4.010", true, true},
		{"plentyId", "41523", true, true},
		{"orderId", "2302", true, true},
		{"orderId", "lt:2302", false, false},
		{"createdAt", "lt:2026-11-20T11:40:18+01:00", true, true},
		{"createdAt", "gt:2026-11-20T10:40:17Z", false, false},
		{"locationId", "1", true, true},
	} {
		sp, err := SplitScope([]order.Filter{mustFilter(t, tc.field, tc.raw)}, nil)
		if err != nil {
			t.Fatalf("%s=%s: %v", tc.field, tc.raw, err)
		}
		sc := sp.Local
		if sc == nil {
			// A filter the service applies: evaluate it locally as a group
			// would be when mixed with a changing field.
			sc, err = localGroup(&order.Group{Fields: sp.Sent}, 0)
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := sc.Match(2302, st); got != tc.want {
			t.Errorf("%s=%s on %+v: %v, want %v", tc.field, tc.raw, *st, got, tc.want)
		}
		if got := sc.Match(2302, noOwner); got != tc.wantNo {
			t.Errorf("%s=%s on %+v: %v, want %v", tc.field, tc.raw, *noOwner, got, tc.wantNo)
		}
	}
	// null and nn in a complex filter.
	for body, want := range map[string][2]bool{
		`{"fields":[{"field":"ownerId","operator":"null","value":null}]}`:                                                                     {false, true},
		`{"fields":[{"field":"ownerId","operator":"nn","value":null}]}`:                                                                       {true, false},
		`{"fields":[{"field":"ownerId","operator":"nin","value":["3"]}]}`:                                                                     {false, true},
		`{"conditionType":"or","fields":[{"field":"statusId","operator":"eq","value":5},{"field":"ownerId","operator":"null","value":null}]}`: {true, true},
	} {
		sp, err := SplitScope(nil, mustGroup(t, body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got := [2]bool{sp.Local.Match(2302, st), sp.Local.Match(2302, noOwner)}; got != want {
			t.Errorf("%s: %v, want %v", body, got, want)
		}
	}
	var none *Scope
	if !none.Match(1, st) {
		t.Error("a nil scope holds every order")
	}
}

// TestDecideScope: with statusId=in:5,6 evaluated here, an order leaving the
// scope (5 -> 7) and coming back (7 -> 5) is published; changes outside the
// scope are tracked silently; an order never in scope is not stored.
func TestDecideScope(t *testing.T) {
	sp, err := SplitScope([]order.Filter{mustFilter(t, "statusId", "in:5,6")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	opt := Options{Scope: sp.Local}
	at := func(sec int) string {
		return `updatedAt="2026-11-22T10:02:` + string(rune('0'+sec/10)) + string(rune('0'+sec%10)) + `+01:00"`
	}

	// Never in scope: not stored, no event, in the baseline or after it.
	for _, inBaseline := range []bool{true, false} {
		_, store, events := Decide(nil, entry(t, "statusId=7", at(1)), Options{Scope: sp.Local, InBaseline: inBaseline})
		if store || len(events) != 0 {
			t.Errorf("first sight out of scope (baseline %v): store %v events %v", inBaseline, store, events)
		}
	}
	// First sight in scope: as without a scope.
	cur, store, events := Decide(nil, entry(t, "statusId=5", at(1)), opt)
	if !store || len(events) != 1 || events[0].Type != Discovered {
		t.Fatalf("first sight in scope: store %v events %+v", store, events)
	}
	steps := []struct {
		status string
		event  bool
	}{
		{"6", true},  // in -> in
		{"7", true},  // leaves
		{"8", false}, // out -> out: tracked, silent
		{"5", true},  // comes back, from 8
		{"7", true},  // leaves again
	}
	for i, s := range steps {
		prev := cur
		var events []Event
		cur, store, events = Decide(&prev, entry(t, "statusId="+s.status, at(2+i)), opt)
		if !store {
			t.Errorf("-> %s: not stored; a tracked order is kept current out of scope too", s.status)
		}
		if got := len(events) == 1; got != s.event {
			t.Errorf("%s -> %s: events %+v, want one: %v", prev.StatusID, s.status, events, s.event)
		}
		if s.event && (events[0].Type != StatusChanged || !events[0].Before.StatusID.Equal(prev.StatusID)) {
			t.Errorf("%s -> %s: %+v", prev.StatusID, s.status, events[0])
		}
	}
}
