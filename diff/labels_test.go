package diff

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/refdata"
)

// withRelations is an entry with the relations WATCHER_WITH loads, in the
// shapes of the real service.
const withRelations = `{"id":2302,"referrerId":1,"plentyId":41523,"typeId":1,"lockStatus":"unlocked","locationId":"1",` +
	`"createdAt":"2026-11-20T11:40:17+01:00","updatedAt":"2026-11-22T10:02:41+01:00","statusId":5,"ownerId":"3",` +
	`"addresses":[{"id":11,"gender":"female","name2":"Ada","postalCode":"27498","town":"Helgoland","countryId":255,"pivot":{"typeId":1}},` +
	`{"id":12,"postalCode":"10115","town":"Berlin","countryId":1,"pivot":{"typeId":2}}],` +
	`"amounts":[{"id":1,"isSystemCurrency":true,"currency":"EUR","exchangeRate":1,"grossTotal":119.9},{"id":2,"isSystemCurrency":false,"currency":"CHF","exchangeRate":0.94}],` +
	`"payments":[{"id":7,"amount":119.9,"mopId":6000,"status":3,"currency":"EUR"},{"id":8,"amount":5,"mopId":6001,"status":9,"currency":"EUR"}],` +
	`"orderItems":[{"id":1,"amounts":[{"currency":"GBP","priceGross":10}]}]}`

func encodeEntry(t testing.TB, raw string) []byte {
	t.Helper()
	o, err := order.DecodeOrder(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("DecodeOrder(%s): %v", raw, err)
	}
	_, _, events := Decide(nil, o, Options{})
	return Encode(nil, events[0], "https://shop.example")
}

// labelsOf returns data.labels of an encoded event, nil when absent.
func labelsOf(t testing.TB, b []byte) map[string]map[string]map[string]any {
	t.Helper()
	if !utf8.Valid(b) || !json.Valid(b) {
		t.Fatalf("invalid JSON: %s", b)
	}
	var ev struct {
		Data struct {
			Labels map[string]map[string]map[string]any `json:"labels"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	return ev.Data.Labels
}

func TestLabelsEveryKind(t *testing.T) {
	b := encodeEntry(t, withRelations)
	want := `,"labels":{"countries":{"1":{"iso":"DE"},"255":{"iso":"DE","name":"Helgoland","territory":true}},` +
		`"currencies":{"CHF":{"code":"CHF","name":"Swiss Franc"},"EUR":{"code":"EUR","name":"Euro"},"GBP":{"code":"GBP","name":"Pound Sterling"}},` +
		`"paymentStatuses":{"3":{"name":"Captured"},"9":{"name":"Refunded"}}}}}`
	if !bytes.HasSuffix(b, []byte(withRelations+want)) {
		t.Errorf("got  %s\nwant the entry, then %s", b, want)
	}
}

func TestLabels(t *testing.T) {
	head := `{"id":9,"updatedAt":"2026-11-22T10:02:41+01:00",`
	tests := []struct {
		name string
		rels string
		want string // JSON of data.labels, "" when absent
	}{
		{"country", `"addresses":[{"countryId":12}]`, `{"countries":{"12":{"iso":"GB"}}}`},
		{"country unknown (0)", `"addresses":[{"countryId":0}]`, `{"countries":{"0":{"name":"Unknown"}}}`},
		{"country territory", `"addresses":[{"countryId":37}]`, `{"countries":{"37":{"iso":"IC","name":"Canary Islands","territory":true}}}`},
		{"country three letters", `"addresses":[{"countryId":258}]`, `{"countries":{"258":{"iso":"CUW"}}}`},
		{"country as string and as 1.0", `"addresses":[{"countryId":"2"},{"countryId":3.0}]`, `{"countries":{"2":{"iso":"AT"},"3":{"iso":"BE"}}}`},
		{"countries deduplicated and sorted", `"addresses":[{"countryId":10},{"countryId":1},{"countryId":10}]`, `{"countries":{"1":{"iso":"DE"},"10":{"iso":"FR"}}}`},
		{"amount currency", `"amounts":[{"currency":"USD"}]`, `{"currencies":{"USD":{"code":"USD","name":"US Dollar"}}}`},
		{"currency as sent in lower case", `"amounts":[{"currency":"eur"}]`, `{"currencies":{"eur":{"code":"EUR","name":"Euro"}}}`},
		{"currency with an escape", `"amounts":[{"currency":"\u0045UR"}]`, `{"currencies":{"EUR":{"code":"EUR","name":"Euro"}}}`},
		{"payment status and currency", `"payments":[{"status":1,"currency":"PLN"}]`, `{"currencies":{"PLN":{"code":"PLN","name":"Zloty"}},"paymentStatuses":{"1":{"name":"Awaiting approval"}}}`},
		{"order item amounts", `"orderItems":[{"amounts":[{"currency":"SEK"}]},{"id":2}]`, `{"currencies":{"SEK":{"code":"SEK","name":"Swedish Krona"}}}`},
		{"relation as one object", `"payments":{"id":1,"status":10}`, `{"paymentStatuses":{"10":{"name":"Partially refunded"}}}`},
		{"relation keyed by id (PHP array with gaps)", `"addresses":{"4":{"countryId":4},"9":{"countryId":5}}`, `{"countries":{"4":{"iso":"CH"},"5":{"iso":"CY"}}}`},

		// Unknown ids and codes: left as sent, no label.
		{"unused country id", `"addresses":[{"countryId":111}]`, ""},
		{"country id beyond the list", `"addresses":[{"countryId":266},{"countryId":99999999999}]`, ""},
		{"negative and fractional ids", `"addresses":[{"countryId":-1},{"countryId":1.5},{"countryId":1e0}]`, ""},
		{"unknown currency", `"amounts":[{"currency":"XXX"},{"currency":"EURO"},{"currency":""}]`, ""},
		{"unknown payment status", `"payments":[{"status":0},{"status":11}]`, ""},
		{"unknown next to known", `"addresses":[{"countryId":111},{"countryId":1}]`, `{"countries":{"1":{"iso":"DE"}}}`},

		// Absent relations.
		{"no relations", `"statusId":5`, ""},
		{"empty relations", `"addresses":[],"amounts":[],"payments":{}`, ""},
		{"null relations", `"addresses":null,"amounts":null,"payments":null,"orderItems":null`, ""},
		{"relations without the field", `"addresses":[{"id":1}],"payments":[{"id":1,"mopId":6000}]`, ""},
		{"relation names only in values", `"note":"addresses amounts \"payments\"","x":{"addresses":[{"countryId":1}]}`, ""},

		// Malformed shapes: no label, no panic, the event is still valid JSON.
		{"relation is a string", `"addresses":"DE","amounts":"EUR","payments":"3"`, ""},
		{"relation is a number", `"addresses":1,"amounts":true,"payments":3.5`, ""},
		{"items are not objects", `"addresses":[1,"DE",null,[{"countryId":1}]],"amounts":[["EUR"]]`, ""},
		{"codes of the wrong type", `"addresses":[{"countryId":{"id":1}},{"countryId":[1]},{"countryId":true},{"countryId":null}],"amounts":[{"currency":978},{"currency":["EUR"]}],"payments":[{"status":"Captured"}]`, ""},
		{"order item amounts malformed", `"orderItems":[{"amounts":"EUR"},{"amounts":[{"currency":null}]},"x"]`, ""},
		{"deep nesting", `"addresses":[{"countryId":1,"options":[[[[{"a":[{}]}]]]]}],"payments":[{"status":3,"method":{"status":5}}]`, `{"countries":{"1":{"iso":"DE"}},"paymentStatuses":{"3":{"name":"Captured"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := head + tt.rels + `}`
			b := encodeEntry(t, raw)
			var ev struct {
				Data struct {
					Order  json.RawMessage `json:"order"`
					Labels json.RawMessage `json:"labels"`
				} `json:"data"`
			}
			if err := json.Unmarshal(b, &ev); err != nil {
				t.Fatalf("%v: %s", err, b)
			}
			if string(ev.Data.Labels) != tt.want {
				t.Errorf("labels = %s\nwant     %s", ev.Data.Labels, tt.want)
			}
			if string(ev.Data.Order) != raw {
				t.Errorf("order changed: %s", ev.Data.Order)
			}
			if tt.want == "" && bytes.Contains(b, []byte(`"labels"`)) && !strings.Contains(raw, `"labels"`) {
				t.Errorf("an event without labels names the key: %s", b)
			}
		})
	}
}

// TestLabelsLeaveOtherEventsAlone: an entry without relations encodes
// exactly as before labels existed (the order, then the end of data).
func TestLabelsLeaveOtherEventsAlone(t *testing.T) {
	for _, raw := range fixtureEntries(t) {
		o, err := order.DecodeOrder(raw)
		if err != nil {
			continue
		}
		_, _, events := Decide(nil, o, Options{})
		b := Encode(nil, events[0], "s")
		if !bytes.HasSuffix(b, append(bytes.TrimSpace(raw), "}}"...)) {
			t.Errorf("entry without relations: the event does not end with the entry: %s", b)
		}
	}
}

// TestLabelTablesMatchRefdata: every code of the lists has its label, with
// the list's names.
func TestLabelTablesMatchRefdata(t *testing.T) {
	for _, c := range refdata.Countries() {
		var l struct {
			ISO       string `json:"iso"`
			Name      string `json:"name"`
			Territory bool   `json:"territory"`
		}
		if err := json.Unmarshal(countryLabels[c.ID], &l); err != nil || l.ISO != c.ISO || l.Name != c.Name || l.Territory != c.Territory {
			t.Errorf("country %d: label %s (%v), want %+v", c.ID, countryLabels[c.ID], err, c)
		}
	}
	for id := range countryLabels {
		if _, ok := refdata.CountryByID(id); ok != (countryLabels[id] != nil) {
			t.Errorf("country %d: label %s, in the list %v", id, countryLabels[id], ok)
		}
	}
	for _, p := range refdata.PaymentStatuses() {
		if want := `{"name":"` + p.Name + `"}`; string(paymentStatusLabels[p.ID]) != want {
			t.Errorf("payment status %d: label %s, want %s", p.ID, paymentStatusLabels[p.ID], want)
		}
	}
	if len(currencyLabels) != len(refdata.Currencies()) {
		t.Errorf("%d currency labels, %d currencies", len(currencyLabels), len(refdata.Currencies()))
	}
}

// FuzzLabels compares the labels of an arbitrary entry with what a plain
// encoding/json reading of the same rules gives, and checks that the event
// stays valid JSON.
func FuzzLabels(f *testing.F) {
	f.Add([]byte(withRelations))
	f.Add([]byte(`{"id":1,"updatedAt":"2026-01-01T00:00:00Z","addresses":{"1":{"countryId":"37"}},"payments":{"status":2}}`))
	f.Add([]byte(`{"id":1,"updatedAt":"2026-01-01T00:00:00Z","orderItems":[{"amounts":{"currency":"eur"}}],"amounts":[{"currency":"\u0045UR"}]}`))
	f.Add([]byte(`{"id":1,"updatedAt":"2026-01-01T00:00:00Z","addresses":[{"countryId":1.000},{"countryId":"007"},{"countryId":-0}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		o, err := order.DecodeOrder(raw)
		if err != nil {
			return
		}
		_, _, events := Decide(nil, o, Options{})
		b := Encode(nil, events[0], "s")
		got := labelsOf(t, b)
		clean, valid := cleanRaw(raw)
		if !valid || bytes.Contains(clean, []byte(`\u`)) || hasDuplicateKeys(clean) {
			return // the reference below decodes escapes in keys and keeps the last of duplicate keys
		}
		want := referenceLabels(t, clean)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("labels\n got %v\nwant %v\nentry %s", got, want, clean)
		}
	})
}

var idText = regexp.MustCompile(`^[0-9]{1,9}(\.0+)?$`)

// referenceLabels applies the rules of labels.go with encoding/json.
func referenceLabels(t *testing.T, raw []byte) map[string]map[string]map[string]any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var entry map[string]any
	if err := dec.Decode(&entry); err != nil {
		return nil
	}
	out := map[string]map[string]map[string]any{}
	put := func(kind, key string, label map[string]any) {
		if out[kind] == nil {
			out[kind] = map[string]map[string]any{}
		}
		out[kind][key] = label
	}
	id := func(v any) (int, string, bool) {
		var s string
		switch v := v.(type) {
		case json.Number:
			s = v.String()
		case string:
			s = v
		default:
			return 0, "", false
		}
		if !idText.MatchString(s) {
			return 0, "", false
		}
		s, _, _ = strings.Cut(s, ".")
		n := 0
		for _, c := range s {
			n = n*10 + int(c-'0')
		}
		return n, strings.TrimLeft(s[:len(s)-1], "0") + s[len(s)-1:], true
	}
	country := func(v any) {
		if n, key, ok := id(v); ok {
			if c, ok := refdata.CountryByID(n); ok {
				l := map[string]any{}
				if c.ISO != "" {
					l["iso"] = c.ISO
				}
				if c.Name != "" {
					l["name"] = c.Name
				}
				if c.Territory {
					l["territory"] = true
				}
				put("countries", key, l)
			}
		}
	}
	currency := func(v any) {
		if s, ok := v.(string); ok {
			if c, ok := refdata.CurrencyByCode(s); ok && len(s) == 3 {
				put("currencies", s, map[string]any{"code": c.Code, "name": c.Name})
			}
		}
	}
	status := func(v any) {
		if n, key, ok := id(v); ok {
			if name, ok := refdata.PaymentStatus(n); ok {
				put("paymentStatuses", key, map[string]any{"name": name})
			}
		}
	}
	items := func(rel any, field string) []map[string]any {
		var out []map[string]any
		switch rel := rel.(type) {
		case []any:
			for _, v := range rel {
				if m, ok := v.(map[string]any); ok {
					out = append(out, m)
				}
			}
		case map[string]any:
			if _, ok := rel[field]; ok {
				return []map[string]any{rel}
			}
			for _, k := range slices.Sorted(maps.Keys(rel)) {
				if m, ok := rel[k].(map[string]any); ok {
					out = append(out, m)
				}
			}
		}
		return out
	}
	for _, a := range items(entry["addresses"], "countryId") {
		country(a["countryId"])
	}
	for _, a := range items(entry["amounts"], "currency") {
		currency(a["currency"])
	}
	for _, p := range items(entry["payments"], "status") {
		status(p["status"])
		currency(p["currency"])
	}
	for _, it := range items(entry["orderItems"], "amounts") {
		for _, a := range items(it["amounts"], "currency") {
			currency(a["currency"])
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// hasDuplicateKeys reports whether an object in raw names a key twice.
func hasDuplicateKeys(raw []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		keys   map[string]bool
		object bool
		expect bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return false
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.expect {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return true
				}
				top.keys[k] = true
				top.expect = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]bool{}, object: true, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expect = true
		}
	}
}

func BenchmarkEncodeWithRelations(b *testing.B) {
	o, err := order.DecodeOrder(json.RawMessage(withRelations))
	if err != nil {
		b.Fatal(err)
	}
	prev := StateOf(o)
	prev.StatusID = order.MustDecimal("4")
	_, _, events := Decide(&prev, o, Options{})
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = Encode(buf[:0], events[0], "https://shop.example/rest")
	}
	b.SetBytes(int64(len(buf)))
}

func TestHasRelationKey(t *testing.T) {
	for _, s := range []string{`{"addresses":1}`, `{"amounts":1}`, `{"payments" :1}`, `{"orderItems":[]}`, `"addresses"`, `{"x":"s","payments":[]}`} {
		if !hasRelationKey([]byte(s)) {
			t.Errorf("%s: no relation key found", s)
		}
	}
	for _, s := range []string{`{"address":1}`, `addresses"`, `{"amount":"s"}`, `s"`, `"s"`, ``, `{"lockStatus":"x","numberOfDecimals":2}`} {
		if hasRelationKey([]byte(s)) {
			t.Errorf("%s: a relation key found", s)
		}
	}
}
