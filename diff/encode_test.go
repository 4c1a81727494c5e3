package diff

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/orderwatch/orderwatch/plenty/order"
)

func TestEncodeExact(t *testing.T) {
	raw := `{"id":2302,"referrerId":4.01,"roundTotalsOnly":true,"numberOfDecimals":2,"plentyId":41523,"typeId":1,"lockStatus":"permanentlyLocked","locationId":"1","createdAt":"2026-11-20T11:40:17+01:00","updatedAt":"2026-11-22T10:02:41+01:00","statusId":5.10,"ownerId":null}`
	o, err := order.DecodeOrder(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	prev := StateOf(o)
	prev.StatusID = order.MustDecimal("5")
	prev.LockStatus = "unlocked"
	prev.UpdatedAt = order.Time{Time: mustTime(t, "2026-11-22T08:00:00Z")}
	_, _, events := Decide(&prev, o, Options{})
	if len(events) != 2 {
		t.Fatalf("events = %+v", events)
	}
	got := string(Encode(nil, events[0], "https://shop.example/rest"))
	want := `{"specversion":"1.0","id":"` + events[0].ID + `","source":"https://shop.example/rest","type":"order.status_changed","subject":"2302","time":"2026-11-22T10:02:41+01:00","datacontenttype":"application/json",` +
		`"data":{"orderId":2302,` +
		`"before":{"statusId":5,"lockStatus":"unlocked","typeId":1,"referrerId":4.01,"plentyId":41523,"ownerId":null,"locationId":"1","createdAt":"2026-11-20T11:40:17+01:00","updatedAt":"2026-11-22T08:00:00Z"},` +
		`"after":{"statusId":5.1,"lockStatus":"permanentlyLocked","typeId":1,"referrerId":4.01,"plentyId":41523,"ownerId":null,"locationId":"1","createdAt":"2026-11-20T11:40:17+01:00","updatedAt":"2026-11-22T10:02:41+01:00"},` +
		`"order":` + raw + `}}`
	if got != want {
		t.Errorf("Encode:\n got %s\nwant %s", got, want)
	}
	if events[0].ID != EventID(2302, StatusChanged, "5", "5.1", prev.UpdatedAt.Time, o.UpdatedAt.Time) {
		t.Errorf("id %s is not the id of (2302, status_changed, 5, 5.1, before.updatedAt, updatedAt)", events[0].ID)
	}
	// Appends: an existing prefix is kept.
	if got := Encode([]byte("x"), events[0], "s"); got[0] != 'x' || !json.Valid(got[1:]) {
		t.Errorf("Encode does not append: %s", got)
	}
}

func TestEncodeFirstSightAndNulls(t *testing.T) {
	raw := "{\"id\":9001,\"updatedAt\":\"2026-07-01T12:00:00+02:00\",\"createdAt\":\"-0001-11-30T00:00:00+01:00\",\"note\":\"caf\xe9 \\u2028\"}"
	o, err := order.DecodeOrder(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	_, _, events := Decide(nil, o, Options{Baseline: mustTime(t, "2026-01-01T00:00:00Z")})
	b := Encode(nil, events[0], "src\"\\\n")
	if !utf8.Valid(b) || !json.Valid(b) {
		t.Fatalf("invalid JSON: %q", b)
	}
	var ce struct {
		Source string `json:"source"`
		Type   string `json:"type"`
		Data   struct {
			Before json.RawMessage            `json:"before"`
			After  map[string]json.RawMessage `json:"after"`
			Order  map[string]any             `json:"order"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &ce); err != nil {
		t.Fatal(err)
	}
	if ce.Source != "src\"\\\n" || ce.Type != "order.discovered" || string(ce.Data.Before) != "null" {
		t.Errorf("source %q type %q before %s", ce.Source, ce.Type, ce.Data.Before)
	}
	for _, k := range []string{"statusId", "lockStatus", "referrerId", "ownerId", "locationId", "createdAt"} {
		if string(ce.Data.After[k]) != "null" {
			t.Errorf("after.%s = %s, want null", k, ce.Data.After[k])
		}
	}
	if string(ce.Data.After["updatedAt"]) != `"2026-07-01T12:00:00+02:00"` {
		t.Errorf("after.updatedAt = %s", ce.Data.After["updatedAt"])
	}
	if ce.Data.Order["note"] != "caf\uFFFD \u2028" {
		t.Errorf("order.note = %q", ce.Data.Order["note"])
	}
}

func TestEncodeRawFallbacks(t *testing.T) {
	for _, raw := range []string{"", "  ", "not json", "{\"a\":", "{\"a\":\"\xff\"}", " {\"a\":1}\n"} {
		b := Encode(nil, Event{ID: "x", Type: Created, OrderID: 1, Order: json.RawMessage(raw)}, "s")
		if !utf8.Valid(b) || !json.Valid(b) {
			t.Errorf("raw %q: invalid JSON %q", raw, b)
		}
	}
}

// TestEncodeFixtures round-trips every event of every fixture entry through
// encoding/json and checks each field.
func TestEncodeFixtures(t *testing.T) {
	baseline := mustTime(t, "2026-11-21T00:00:00+01:00")
	n := 0
	for _, raw := range fixtureEntries(t) {
		o, err := order.DecodeOrder(raw)
		if err != nil {
			continue // the bad entry of search-page-bad-entry.json
		}
		prev := StateOf(o)
		prev.StatusID = order.MustDecimal("1.5")
		prev.LockStatus = "something\"else"
		prev.UpdatedAt = order.Time{Time: o.UpdatedAt.Add(-time.Hour)}
		var events []Event
		for _, p := range []*State{nil, &prev} {
			_, _, evs := Decide(p, o, Options{Baseline: baseline, EmitUpdated: true})
			events = append(events, evs...)
		}
		for _, e := range events {
			n++
			checkEncoded(t, e, Encode(nil, e, "https://shop.example"))
		}
	}
	if n < 12 {
		t.Fatalf("only %d events checked", n)
	}
}

// checkEncoded decodes an encoded event with encoding/json and compares every
// field with the event.
func checkEncoded(t testing.TB, e Event, b []byte) {
	t.Helper()
	if !utf8.Valid(b) || !json.Valid(b) {
		t.Fatalf("%s: invalid JSON: %q", e.Type, b)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var ce map[string]any
	if err := dec.Decode(&ce); err != nil {
		t.Fatalf("%s: %v", e.Type, err)
	}
	want := map[string]any{
		"specversion":     "1.0",
		"id":              e.ID,
		"type":            string(e.Type),
		"subject":         strconv.FormatInt(e.OrderID, 10),
		"datacontenttype": "application/json",
	}
	for k, v := range want {
		if ce[k] != v {
			t.Errorf("%s: %s = %#v, want %#v", e.Type, k, ce[k], v)
		}
	}
	if !e.After.UpdatedAt.IsZero() {
		tm, err := time.Parse(time.RFC3339, ce["time"].(string))
		if err != nil || !tm.Equal(e.After.UpdatedAt.Time) {
			t.Errorf("%s: time %v (%v), want %v", e.Type, ce["time"], err, e.After.UpdatedAt)
		}
		if ce["time"] != e.After.UpdatedAt.Format(time.RFC3339) {
			t.Errorf("%s: time %v lost its offset, want %s", e.Type, ce["time"], e.After.UpdatedAt.Format(time.RFC3339))
		}
	}
	data := ce["data"].(map[string]any)
	if data["orderId"] != json.Number(strconv.FormatInt(e.OrderID, 10)) {
		t.Errorf("%s: data.orderId = %v", e.Type, data["orderId"])
	}
	checkState(t, "after", &e.After, data["after"])
	if e.Before == nil {
		if data["before"] != nil {
			t.Errorf("%s: before = %v, want null", e.Type, data["before"])
		}
	} else {
		checkState(t, "before", e.Before, data["before"])
	}
	// order is the entry: compare as decoded JSON values.
	var wantOrder any
	d2 := json.NewDecoder(bytes.NewReader(e.Order))
	d2.UseNumber()
	if err := d2.Decode(&wantOrder); err == nil {
		gotOrder, _ := json.Marshal(data["order"])
		wantJSON, _ := json.Marshal(wantOrder)
		if string(gotOrder) != string(wantJSON) {
			t.Errorf("%s: order = %s, want %s", e.Type, gotOrder, wantJSON)
		}
	}
}

func checkState(t testing.TB, which string, s *State, v any) {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%s = %#v, want an object", which, v)
	}
	if len(m) != 9 {
		t.Errorf("%s has %d fields, want 9: %v", which, len(m), m)
	}
	dec := func(key string, d order.Decimal) {
		if d.IsZero() {
			if m[key] != nil {
				t.Errorf("%s.%s = %v, want null", which, key, m[key])
			}
			return
		}
		if m[key] != json.Number(d.Canonical()) {
			t.Errorf("%s.%s = %#v, want %s", which, key, m[key], d.Canonical())
		}
	}
	str := func(key, s string) {
		var want any
		if s != "" {
			want = validUTF8(s)
		}
		if m[key] != want {
			t.Errorf("%s.%s = %#v, want %#v", which, key, m[key], want)
		}
	}
	tm := func(key string, tt order.Time) {
		var want any
		if !tt.IsZero() {
			want = tt.Format(time.RFC3339)
		}
		if m[key] != want {
			t.Errorf("%s.%s = %#v, want %#v", which, key, m[key], want)
		}
	}
	dec("statusId", s.StatusID)
	dec("referrerId", s.ReferrerID)
	str("lockStatus", s.LockStatus)
	str("ownerId", string(s.OwnerID))
	str("locationId", string(s.LocationID))
	tm("createdAt", s.CreatedAt)
	tm("updatedAt", s.UpdatedAt)
	if m["typeId"] != json.Number(strconv.FormatInt(s.TypeID, 10)) || m["plentyId"] != json.Number(strconv.FormatInt(s.PlentyID, 10)) {
		t.Errorf("%s: typeId %v plentyId %v, want %d %d", which, m["typeId"], m["plentyId"], s.TypeID, s.PlentyID)
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\" back\\slash", "\x00\x01\x1f\x7f", "tab\tnl\nret\r", "ümlaut 日本", "\u2028\u2029", "bad \xff\xfe utf8", "\xed\xa0\x80", "<&>"} {
		got := appendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("%q: %s is not a JSON string: %v", s, got, err)
			continue
		}
		if want := validUTF8(s); back != want {
			t.Errorf("%q: round trip %q, want %q", s, back, want)
		}
		if !utf8.Valid(got) {
			t.Errorf("%q: output %q is not UTF-8", s, got)
		}
	}
}

func TestStateMarshalJSON(t *testing.T) {
	s := stateOf(t, `statusId="5.70"`, `ownerId=`)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"statusId":5.7,"lockStatus":"unlocked","typeId":1,"referrerId":4.01,"plentyId":41523,"ownerId":null,"locationId":"1","createdAt":"2026-11-20T11:40:17+01:00","updatedAt":"2026-11-22T10:02:41+01:00"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}

func BenchmarkEncode(b *testing.B) {
	o := entry(b)
	prev := StateOf(o)
	prev.StatusID = order.MustDecimal("4")
	_, _, events := Decide(&prev, o, Options{})
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		buf = Encode(buf[:0], events[0], "https://shop.example/rest")
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecide(b *testing.B) {
	o := entry(b, `statusId=6`)
	prev := StateOf(entry(b))
	b.ReportAllocs()
	for b.Loop() {
		_, _, events := Decide(&prev, o, Options{})
		if len(events) != 1 {
			b.Fatal(events)
		}
	}
}

// validUTF8 replaces each invalid byte with U+FFFD, as encoding/json does.
func validUTF8(s string) string { return strings.Map(func(r rune) rune { return r }, s) }

func TestDecodeEventRoundTrip(t *testing.T) {
	after := *stateOf(t)
	before := *stateOf(t)
	before.StatusID = order.MustDecimal("5.1")
	before.LockStatus = ""
	for _, b := range []*State{nil, &before} {
		e := Event{ID: "x1", Type: StatusChanged, OrderID: 42, Before: b, After: after, Order: json.RawMessage(`{"id":42}`)}
		got, err := DecodeEvent(Encode(nil, e, "src"))
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != "x1" || got.OrderID != 42 || !got.After.Same(after) || (b == nil) != (got.Before == nil) || (b != nil && !got.Before.Same(*b)) {
			t.Errorf("DecodeEvent = %+v, want before %+v after %+v", got, b, after)
		}
	}
	if _, err := DecodeEvent([]byte(`{"id":"x","data":{}}`)); err == nil {
		t.Error("an event without data.after decoded")
	}
}
