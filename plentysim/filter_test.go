package plentysim

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestDecimal(t *testing.T) {
	tests := []struct {
		a, b  string
		cmp   int
		canon string // of a
	}{
		{"5.1", "5.10", 0, "5.1"},
		{"5.1", "5.7", -1, "5.1"},
		{"5.7", "11.1", -1, "5.7"},
		{"9", "11.1", -1, "9"},
		{"11.1", "11", 1, "11.1"},
		{"7.01", "7.1", -1, "7.01"},
		{"7.01", "7", 1, "7.01"},
		{"05.10", "5.1", 0, "5.1"},
		{"+5", "5", 0, "5"},
		{"-0.0", "0", 0, "0"},
		{"-1.5", "-1.25", -1, "-1.5"},
		{"-1", "0.5", -1, "-1"},
		{"0.5", "-1", 1, "0.5"},
		{"1e2", "100", 0, "100"},
		{"5.1E-1", "0.51", 0, "0.51"},
		{"51e-1", "5.1", 0, "5.1"},
		{"0.051e2", "5.1", 0, "5.1"},
		{"123456789012345678901234567890", "123456789012345678901234567889", 1, "123456789012345678901234567890"},
	}
	for _, tt := range tests {
		a, err := parseDecimal(tt.a)
		if err != nil {
			t.Fatalf("parse %q: %v", tt.a, err)
		}
		b, err := parseDecimal(tt.b)
		if err != nil {
			t.Fatalf("parse %q: %v", tt.b, err)
		}
		if got := a.cmp(b); got != tt.cmp {
			t.Errorf("cmp(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.cmp)
		}
		if got := b.cmp(a); got != -tt.cmp {
			t.Errorf("cmp(%s, %s) = %d, want %d", tt.b, tt.a, got, -tt.cmp)
		}
		if got := a.String(); got != tt.canon {
			t.Errorf("String(%s) = %s, want %s", tt.a, got, tt.canon)
		}
	}
	for _, bad := range []string{"", "-", ".5", "5.", "5,1", " 5", "5 ", "0x10", "1e", "1e1000", "1e+", "NaN", "Inf", "5.1.1", "--5"} {
		if _, err := parseDecimal(bad); err == nil {
			t.Errorf("parseDecimal(%q) accepted", bad)
		}
	}
}

func TestParseSimpleFilter(t *testing.T) {
	tests := []struct {
		name, raw string
		want      Condition // Field, Op, Values
		err       string
	}{
		{"statusId", "5", Condition{Field: "statusId", Op: "eq", Values: []string{"5"}}, ""},
		{"statusId", "in:5,6.10", Condition{Field: "statusId", Op: "in", Values: []string{"5", "6.1"}}, ""},
		{"updatedAt", "2026-11-22T10:00:00+01:00", Condition{Field: "updatedAt", Op: "eq", Values: []string{"2026-11-22T10:00:00+01:00"}}, ""},
		{"orderProperty_12", "eq:a:b,c", Condition{Field: "orderProperty_12", Op: "eq", Values: []string{"a:b,c"}}, ""},
		{"relationReference_contact_receiver", "between:1,9", Condition{Field: "relationReference_contact_receiver", Op: "between", Values: []string{"1", "9"}}, ""},
		{"orderId", "gte:+007", Condition{Field: "orderId", Op: "gte", Values: []string{"7"}}, ""},
		{"statusID", "5", Condition{}, "unknown filter"},
		{"orderProperty_", "5", Condition{}, "unknown filter"},
		{"relationReference__x", "5", Condition{}, "unknown filter"},
		{"statusId", "between:1", Condition{}, "exactly 2"},
		{"statusId", "null:", Condition{}, "unknown operator"},
		{"orderProperty_1", "Note: x", Condition{}, "unknown operator"},
		{"orderProperty_1", "gt:x", Condition{}, "not applicable"},
	}
	for _, tt := range tests {
		c, err := ParseSimpleFilter(tt.name, tt.raw)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s=%s: err %v, want %q", tt.name, tt.raw, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s=%s: %v", tt.name, tt.raw, err)
			continue
		}
		if got := (Condition{Field: c.Field, Op: c.Op, Values: c.Values}); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s=%s: %+v, want %+v", tt.name, tt.raw, got, tt.want)
		}
	}
	if _, err := ParseSimpleFilter("nope", "1"); !errors.Is(err, ErrUnknownFilter) {
		t.Errorf("unknown filter error %v does not wrap ErrUnknownFilter", err)
	}
}

func TestGroupJSON(t *testing.T) {
	body := `{"conditionType":"OR","fields":[{"field":"statusId","operator":"in","value":["5.10",6]},{"field":"typo","operator":"eq","value":1}],` +
		`"groups":[{"fields":[{"field":"orderProperty_4","operator":"null","value":null},{"field":"createdAt","operator":"gt","value":"2026-11-22T10:00:00+01:00"}]}]}`
	g, err := ParseComplexFilter([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.Ignored, []string{"typo"}) {
		t.Errorf("Ignored %v", g.Ignored)
	}
	want := `{"conditionType":"or","fields":[{"field":"statusId","operator":"in","value":[5.1,6]}],"groups":[{"conditionType":"and","fields":[` +
		`{"field":"orderProperty_4","operator":"null","value":null},{"field":"createdAt","operator":"gt","value":"2026-11-22T10:00:00+01:00"}],"groups":[]}]}`
	got, _ := g.MarshalJSON()
	if string(got) != want {
		t.Errorf("canonical JSON\n got  %s\n want %s", got, want)
	}
	o := Order{StatusID: "6", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if !g.Match(o) {
		t.Error("status 6 does not match")
	}
	o.StatusID = "7"
	if g.Match(o) {
		t.Error("status 7, created 2026-01-01 matches")
	}
	o.CreatedAt = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	if !g.Match(o) {
		t.Error("created 2026-12-01 without property 4 does not match")
	}
}

// fuzzOrders are matched by fuzzed filters, to find panics in matching.
var fuzzOrders = []Order{
	{},
	{ID: 7, StatusID: "5.1", ReferrerID: "4.01", TypeID: 1, ItemIDs: []int64{1, 2}, VariationIDs: []int64{10},
		Properties: map[int]string{4: "paid", 0: ""}, Relations: map[string]int64{"contact_receiver": 3},
		CreatedAt: PHPZeroDate, UpdatedAt: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)},
}

func FuzzParseSimpleFilter(f *testing.F) {
	for _, s := range [][2]string{
		{"statusId", "in:5,6.1"}, {"statusId", "5.10"}, {"statusId", "between:5.1,11.1"}, {"referrerId", "gt:1e1"},
		{"updatedAt", "between:2026-11-22T10:00:00+01:00,2026-11-22T11:00:00+01:00"}, {"createdAt", "lt:2026-11-22T10:00:00 01:00"},
		{"orderId", "gt:1000"}, {"orderTypeId", "not:1"}, {"itemId", "in:1,2,3"}, {"itemVariationId", "lte:-5"},
		{"orderProperty_4", "eq:paid"}, {"orderProperty_4", "lt:x"}, {"orderProperty_4", ""},
		{"relationReference_contact_receiver", "between:1,2"}, {"unknown", "1"}, {"statusId", "like:5"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, raw string) {
		c, err := ParseSimpleFilter(name, raw)
		if err != nil {
			return
		}
		for _, o := range fuzzOrders {
			c.Match(o)
		}
		again, err := ParseSimpleFilter(c.Field, c.Query())
		if err != nil {
			t.Fatalf("%s=%s parsed as %s, which does not parse: %v", name, raw, c, err)
		}
		if again.String() != c.String() {
			t.Fatalf("%s=%s parsed as %s, which parses as %s", name, raw, c, again)
		}
		for _, o := range fuzzOrders {
			if c.Match(o) != again.Match(o) {
				t.Fatalf("%s and its re-parse match %+v differently", c, o)
			}
		}
		// The same condition in a complex filter parses to the same.
		if !utf8.ValidString(c.Field) || !utf8.ValidString(c.Query()) {
			return // JSON cannot carry invalid UTF-8
		}
		body, _ := Group{ConditionType: "and", Fields: []Condition{c}}.MarshalJSON()
		g, err := ParseComplexFilter(body)
		if err != nil {
			t.Fatalf("%s as complex filter %s: %v", c, body, err)
		}
		if len(g.Fields) != 1 || g.Fields[0].String() != c.String() {
			t.Fatalf("%s as complex filter %s parsed as %+v", c, body, g.Fields)
		}
	})
}

func FuzzParseComplexFilter(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `null`, `[]`,
		`{"conditionType":"and","fields":[{"field":"statusId","operator":"in","value":[5,"6.1"]}]}`,
		`{"conditionType":"or","fields":[{"field":"statusId","operator":"eq","value":5}],"groups":[{"conditionType":"and","fields":[{"field":"orderTypeId","operator":"eq","value":3},{"field":"statusId","operator":"gt","value":10}]}]}`,
		`{"fields":[{"field":"createdAt","operator":"between","value":["2026-11-22T10:00:00+01:00","2026-11-22T11:00:00Z"]}]}`,
		`{"fields":[{"field":"orderProperty_4","operator":"null","value":null},{"field":"itemId","operator":"nin","value":[]}]}`,
		`{"fields":[{"field":"relationReference_warehouse_sender","operator":"nn"},{"field":"typo","operator":"x"}]}`,
		`{"fields":[{"field":"referrerId","operator":"lte","value":4.01e0}]}`,
		`{"fields":[{"field":"orderProperty_3","operator":"in","value":[6000,"a\u0000b"]}]}`,
		`{"groups":[{"groups":[{"groups":[{}]}]}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		g, err := ParseComplexFilter(body)
		if err != nil {
			return
		}
		for _, o := range fuzzOrders {
			g.Match(o)
		}
		canon, err := g.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseComplexFilter(canon)
		if err != nil {
			t.Fatalf("%s parsed as %s, which does not parse: %v", body, canon, err)
		}
		if c2, _ := again.MarshalJSON(); string(c2) != string(canon) {
			t.Fatalf("%s parsed as %s, which parses as %s", body, canon, c2)
		}
		for _, o := range fuzzOrders {
			if g.Match(o) != again.Match(o) {
				t.Fatalf("%s and its re-parse match %+v differently", canon, o)
			}
		}
	})
}
