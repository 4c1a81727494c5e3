package order

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestFilterValidate(t *testing.T) {
	ts := At(time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("", 3600)))
	tests := []struct {
		name   string
		f      Filter
		simple bool
		err    string // substring; "" = valid
	}{
		{"eq int", Eq("orderTypeId", Int(1)), true, ""},
		{"eq decimal", Eq("statusId", Dec(MustDecimal("5.1"))), true, ""},
		{"in", In("statusId", Dec(MustDecimal("5")), Dec(MustDecimal("6.1"))), true, ""},
		{"in empty", In("statusId"), true, "at least one"},
		{"between", Between("updatedAt", ts, ts), true, ""},
		{"between one", F("updatedAt", OpBetween, ts), true, "takes 2"},
		{"between three", F("createdAt", OpBetween, ts, ts, ts), false, "takes 2"},
		{"eq two", F("statusId", OpEq, Int(1), Int(2)), true, "takes 1"},
		{"null simple", Null("orderProperty_7"), true, "only in complex"},
		{"null complex", Null("orderProperty_7"), false, ""},
		{"nn with value", F("orderProperty_7", OpNn, Str("x")), false, "takes 0"},
		{"nin simple", Nin("statusId", Int(5)), true, "only in complex"},
		{"nin complex", Nin("statusId", Int(5)), false, ""},
		{"range on string", Gt("orderProperty_3", Str("a")), false, "no range operator"},
		{"between on string", Between("orderProperty_3", Str("a"), Str("b")), false, "no range operator"},
		{"eq on string", Eq("orderProperty_3", Str("a b")), true, ""},
		{"int not int", Eq("orderTypeId", Str("one")), true, "not an integer"},
		{"decimal not decimal", Eq("statusId", Str("five")), true, "not a decimal"},
		{"time not time", Gte("updatedAt", Str("yesterday")), true, "not an RFC 3339"},
		{"unknown op", F("statusId", Op("like"), Int(1)), true, "unknown operator"},
		{"bad field", Eq("status id", Int(1)), true, "want letters"},
		{"unknown field any value", Eq("someFilter", Str("x")), true, ""},
		{"relation", Eq("relationReference_contact_receiver", Int(12)), true, ""},
		{"comma in list", In("orderProperty_3", Str("a,b"), Str("c")), true, "comma"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.f.Validate(tt.simple)
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("Validate = %v, want nil", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.err)
			}
		})
	}
}

func TestQueryValuesEncoding(t *testing.T) {
	lo := time.Date(2026, 11, 22, 10, 0, 0, 0, time.FixedZone("", 3600))
	hi := lo.Add(90 * time.Minute)
	q := Query{
		Filters:      []Filter{Between("updatedAt", At(lo), At(hi)), Eq("orderTypeId", Int(1))},
		SortBy:       "orderId",
		SortOrder:    "asc",
		Page:         3,
		ItemsPerPage: 250,
		LazyLoaded:   true,
		With:         []string{"addresses", "orderItems"},
	}
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	enc := q.Values().Encode()
	if strings.Contains(enc, "+01:00") || !strings.Contains(enc, "%2B01%3A00") {
		t.Errorf("the offset's + must be sent as %%2B: %s", enc)
	}
	// What the server sees after decoding:
	back, err := url.ParseQuery(enc)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Get("updatedAt"); got != "between:2026-11-22T10:00:00+01:00,2026-11-22T11:30:00+01:00" {
		t.Errorf("server reads updatedAt=%q", got)
	}
	for k, want := range map[string]string{"orderTypeId": "eq:1", "sortBy": "orderId", "sortOrder": "asc", "page": "3", "itemsPerPage": "250", "lazyLoaded": "true", "with": "addresses,orderItems"} {
		if back.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, back.Get(k), want)
		}
	}
}

func TestQueryValidate(t *testing.T) {
	for name, q := range map[string]Query{
		"two conditions one field": {Filters: []Filter{Gt("statusId", Int(3)), Lt("statusId", Int(9))}},
		"sortOrder":                {SortOrder: "up"},
		"query param as filter":    {Filters: []Filter{Eq("page", Int(2))}},
		"negative page":            {Page: -1},
		"bad complex":              {Complex: And(In("statusId"))},
		"empty group":              {Complex: And()},
	} {
		if err := q.Validate(); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestGroupJSON(t *testing.T) {
	g := And(
		Eq("orderTypeId", Int(1)),
		Or(In("statusId", Dec(MustDecimal("5.1")), Dec(MustDecimal("6"))), Null("orderProperty_4")),
		Between("createdAt", At(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), At(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))),
	)
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"conditionType":"and","fields":[{"field":"orderTypeId","operator":"eq","value":1},` +
		`{"field":"createdAt","operator":"between","value":["2026-01-01T00:00:00+00:00","2026-02-01T00:00:00+00:00"]}],` +
		`"groups":[{"conditionType":"or","fields":[{"field":"statusId","operator":"in","value":[5.1,6]},` +
		`{"field":"orderProperty_4","operator":"null","value":null}],"groups":[]}]}`
	if string(b) != want {
		t.Errorf("group JSON\n got %s\nwant %s", b, want)
	}
}

func TestGroupDepth(t *testing.T) {
	g := And(Eq("orderTypeId", Int(1)))
	for range maxGroupDepth + 1 {
		g = Or(g)
	}
	if err := g.Validate(); err == nil || !strings.Contains(err.Error(), "nested") {
		t.Errorf("Validate = %v, want the depth error", err)
	}
}

func TestFieldKind(t *testing.T) {
	tests := []struct {
		name   string
		kind   Kind
		inSpec bool
	}{
		{"orderTypeId", KindInt, true},
		{"statusId", KindDecimal, true},
		{"updatedAt", KindTime, false},
		{"orderId", KindInt, false},
		{"orderProperty_12", KindString, true},
		{"orderProperty_x", KindUnknown, false},
		{"relationReference_warehouse_sender", KindInt, true},
		{"relationReference_warehouse", KindUnknown, false},
		{"orderTypeID", KindUnknown, false},
	}
	for _, tt := range tests {
		kind, inSpec := FieldKind(tt.name)
		if kind != tt.kind || inSpec != tt.inSpec {
			t.Errorf("FieldKind(%q) = %v, %v; want %v, %v", tt.name, kind, inSpec, tt.kind, tt.inSpec)
		}
	}
}
