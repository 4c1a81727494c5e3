package order

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"
)

func FuzzDecodePage(f *testing.F) {
	addFixtures(f, "search-page.json", "search-page-strings.json", "search-page-empty.json", "search-page-bad-entry.json")
	for _, b := range []string{
		`{"totalsCount":1,"entries":[{"id":1,"st\u0061tusId":9,"updatedAt":"2026-11-22T10:00:00+01:00"}]}`,
		`{"totalsCount":1,"entries":[{"id":1,"updatedAt":"2026-11-22T10:00:00+01:00"}],"entries":[{"id":2,"updatedAt":"2026-11-22T10:00:00+01:00"}]}`,
		`{"totalsCount":"2","page":"1","entries":[{"ID":"7","STATUSID":"5.10","updatedAt":"-0001-11-30T00:00:00+01:00"},null,[],{"id":8,"ownerId":3,"locationId":"1","referrerId":"4.01","updatedAt":"2026-11-22T10:00:00Z"}]}`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := DecodePage(body)
		if err != nil {
			if p != nil {
				t.Fatal("a page with an error")
			}
			return
		}
		if !json.Valid(body) {
			t.Fatal("accepted a body that is not JSON")
		}
		// Every entry encoding/json reads is an order or a bad entry, in
		// its place, with its text kept.
		var ref struct {
			Entries []json.RawMessage `json:"entries"`
		}
		if err := json.Unmarshal(body, &ref); err != nil || len(ref.Entries) != len(p.Orders)+len(p.Bad) {
			t.Fatalf("encoding/json reads %d entries (%v), the decoder %d orders + %d bad", len(ref.Entries), err, len(p.Orders), len(p.Bad))
		}
		next, bad := 0, 0
		for i, raw := range ref.Entries {
			if bad < len(p.Bad) && p.Bad[bad].Index == i {
				if string(p.Bad[bad].Raw) != string(raw) {
					t.Fatalf("bad entry %d: text %q, encoding/json read %q", i, p.Bad[bad].Raw, raw)
				}
				bad++
				continue
			}
			if string(p.Orders[next].Raw) != string(raw) {
				t.Fatalf("entry %d: text %q, encoding/json read %q", i, p.Orders[next].Raw, raw)
			}
			next++
		}
		if bad != len(p.Bad) {
			t.Fatalf("bad entries out of order: %v", p.Bad)
		}
		for _, o := range p.Orders {
			if o.ID <= 0 || o.UpdatedAt.IsZero() || len(o.Raw) == 0 {
				t.Fatalf("decoded an order without id/updatedAt/raw: %+v", o)
			}
			// What decoded once decodes the same from its raw text.
			again, err := DecodeOrder(o.Raw)
			if err != nil || again.ID != o.ID || !again.StatusID.Equal(o.StatusID) || !again.UpdatedAt.Equal(o.UpdatedAt.Time) {
				t.Fatalf("raw entry does not decode to the same order: %v", err)
			}
			if _, err := json.Marshal(struct {
				S, R Decimal
				U    Time
				L    FlexString
			}{o.StatusID, o.ReferrerID, o.UpdatedAt, o.LocationID}); err != nil {
				t.Fatalf("decoded values must re-encode: %v", err)
			}
		}
		for _, b := range p.Bad {
			_ = b.Error()
		}
	})
}

func FuzzFilter(f *testing.F) {
	f.Add("statusId", "in", "5.1", "6", false)
	f.Add("updatedAt", "between", "2026-11-22T10:00:00+01:00", "2026-11-22T11:00:00+01:00", false)
	f.Add("orderProperty_3", "gt", "a", "", true)
	f.Add("x y", "eq", "a,b", "c", false)
	f.Fuzz(func(t *testing.T, field, op, v1, v2 string, complex bool) {
		vals := []Value{Str(v1)}
		if v2 != "" {
			vals = append(vals, Str(v2))
		}
		fl := F(field, Op(op), vals...)
		if err := fl.Validate(!complex); err != nil {
			return
		}
		if complex {
			b, err := json.Marshal(And(fl))
			if err != nil || !json.Valid(b) {
				t.Fatalf("valid filter, invalid body: %v", err)
			}
			return
		}
		q := Query{Filters: []Filter{fl}}
		if q.Validate() != nil {
			return
		}
		back, err := url.ParseQuery(q.Values().Encode())
		if err != nil {
			t.Fatal(err)
		}
		got := back.Get(field)
		wantOp, rest, ok := strings.Cut(got, ":")
		if !ok || Op(wantOp) != fl.Op {
			t.Fatalf("server would read %q for %s %s", got, op, v1)
		}
		parts := strings.Split(rest, ",")
		if len(vals) == 1 && rest != v1 || len(vals) == 2 && (len(parts) != 2 || parts[0] != v1 || parts[1] != v2) {
			t.Fatalf("values do not arrive intact: sent %q %q, server reads %q", v1, v2, rest)
		}
	})
}

func FuzzParseTimeFast(f *testing.F) {
	for _, s := range []string{"2026-11-22T10:02:41+01:00", "2026-11-22T09:02:41Z", "2026-02-31T10:00:00+01:00", "2026-07-01T12:00:00-02:30", "0001-01-01T00:00:00Z", "2026-11-22T24:00:00+01:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fast, ok := parseTimeFast([]byte(s))
		ref, err := time.Parse(time.RFC3339, s)
		if !ok {
			return // the slow path decides
		}
		if err != nil {
			t.Fatalf("fast path accepts %q, time.Parse refuses it: %v", s, err)
		}
		_, fo := fast.Zone()
		_, ro := ref.Zone()
		if !fast.Equal(ref) || fo != ro || fast.Format(time.RFC3339) != ref.Format(time.RFC3339) {
			t.Fatalf("%q: fast %v, time.Parse %v", s, fast, ref)
		}
	})
}
