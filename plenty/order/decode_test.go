package order

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixture reads a sample of what the service sends; the samples live in
// plenty/testdata, beside the client's, since the simulator, the schemas
// and the other packages' tests read them too.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func addFixtures(f *testing.F, names ...string) {
	for _, n := range names {
		f.Add(fixture(f, n))
	}
}

func TestDecimal(t *testing.T) {
	tests := []struct {
		in        string
		canonical string
		token     string
	}{
		{"5", "5", "5"},
		{"5.1", "5.1", "5_1"},
		{"5.10", "5.1", "5_1"},
		{"05.100", "5.1", "5_1"},
		{"7.01", "7.01", "7_01"},
		{"11.1", "11.1", "11_1"},
		{"-0", "0", "0"},
		{"-2.50", "-2.5", "-2_5"},
		{"1e1", "10", "10"},
		{"5.1E0", "5.1", "5_1"},
		{"9007199254740993", "9007199254740993", "9007199254740993"}, // beyond float64's exact integers
	}
	for _, tt := range tests {
		d, err := ParseDecimal(tt.in)
		if err != nil {
			t.Fatalf("ParseDecimal(%q): %v", tt.in, err)
		}
		if d.String() != tt.in || d.Canonical() != tt.canonical || d.SubjectToken() != tt.token {
			t.Errorf("%q: text %q canonical %q token %q, want %q %q", tt.in, d.String(), d.Canonical(), d.SubjectToken(), tt.canonical, tt.token)
		}
	}
	for _, bad := range []string{"", "5.", ".5", "five", "5,1", "1e", "--1", "1e99999", "0x10", " 5"} {
		if _, err := ParseDecimal(bad); !errors.Is(err, ErrInvalidDecimal) {
			t.Errorf("ParseDecimal(%q) = %v, want ErrInvalidDecimal", bad, err)
		}
	}
}

func TestIsCanonical(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "5": true, "5.1": true, "-5.1": true, "0.5": true, "-0.5": true, "10": true,
		"": false, "-0": false, "05": false, "5.10": false, "5.": false, ".5": false, "1e1": false, "-": false, "5.0": false, "00": false,
	} {
		if got := isCanonical(s); got != want {
			t.Errorf("isCanonical(%q) = %v, want %v", s, got, want)
		}
		if d, err := ParseDecimal(s); err == nil && d.Canonical() != d.parsedCanonical() {
			t.Errorf("%q: the fast path gives %q, the parse %q", s, d.Canonical(), d.parsedCanonical())
		}
	}
}

func TestDecimalCmp(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"5", "5", 0},
		{"5.1", "5.10", 0},
		{"5.1", "5.7", -1},
		{"5.7", "11.1", -1},
		{"11.1", "5.7", 1},
		{"7.01", "7.1", -1},
		{"-1", "1", -1},
		{"-2", "-1", -1},
		{"-0", "0", 0},
		{"0.0", "-0.0", 0},
		{"9007199254740993", "9007199254740992", 1},
		{"1e1", "10", 0},
	}
	for _, tt := range tests {
		if got := MustDecimal(tt.a).Cmp(MustDecimal(tt.b)); got != tt.want {
			t.Errorf("Cmp(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := MustDecimal(tt.b).Cmp(MustDecimal(tt.a)); got != -tt.want {
			t.Errorf("Cmp(%s, %s) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
	if (Decimal{}).Cmp(MustDecimal("0")) != -1 || !(Decimal{}).Equal(Decimal{}) {
		t.Error("an absent decimal must sort first and equal another absent one")
	}
}

func TestDecimalJSON(t *testing.T) {
	tests := []struct {
		in, text string
		err      bool
	}{
		{`5`, "5", false},
		{`5.1`, "5.1", false},
		{`"5.7"`, "5.7", false},
		{`" 6.1 "`, "6.1", false},
		{`null`, "", false},
		{`""`, "", false},
		{`"x"`, "", true},
		{`true`, "", true},
		{`{"a":1}`, "", true},
		{`[5]`, "", true},
	}
	for _, tt := range tests {
		var d Decimal
		err := json.Unmarshal([]byte(tt.in), &d)
		if (err != nil) != tt.err || d.String() != tt.text {
			t.Errorf("Unmarshal(%s) = %q, %v; want %q, err=%v", tt.in, d.String(), err, tt.text, tt.err)
		}
	}
	b, _ := json.Marshal(struct{ S, Z Decimal }{MustDecimal("5.10"), Decimal{}})
	if string(b) != `{"S":5.10,"Z":null}` {
		t.Errorf("Marshal = %s: the received text must be kept, absent as null", b)
	}
	// A decimal string that is no JSON number as it stands (found by FuzzDecodePage).
	for in, want := range map[string]string{`"00"`: "0", `"05.10"`: "5.1", `"-007"`: "-7", `"0.5"`: "0.5", `"-0e1"`: "-0e1"} {
		var d Decimal
		if err := json.Unmarshal([]byte(in), &d); err != nil {
			t.Fatal(err)
		}
		if b, err := json.Marshal(d); err != nil || string(b) != want {
			t.Errorf("Marshal(%s) = %s, %v; want %s", in, b, err, want)
		}
	}
}

func TestParseTime(t *testing.T) {
	tests := []struct {
		in     string
		zero   bool
		offset int // seconds east of UTC
		unix   int64
	}{
		{"2026-11-22T10:02:41+01:00", false, 3600, 1795338161},
		{"2026-07-01T12:00:00+02:00", false, 7200, 1782900000},
		{"2026-11-22T09:02:41Z", false, 0, 1795338161},
		{"-0001-11-30T00:00:00+01:00", true, 0, 0},
		{"0000-00-00 00:00:00", true, 0, 0},
		{"", true, 0, 0},
	}
	for _, tt := range tests {
		got, err := ParseTime(tt.in)
		if err != nil {
			t.Fatalf("ParseTime(%q): %v", tt.in, err)
		}
		if got.IsZero() != tt.zero {
			t.Errorf("ParseTime(%q).IsZero() = %v", tt.in, got.IsZero())
			continue
		}
		if tt.zero {
			continue
		}
		_, off := got.Zone()
		if off != tt.offset || got.Unix() != tt.unix {
			t.Errorf("ParseTime(%q) = %v (offset %d), want unix %d offset %d", tt.in, got, off, tt.unix, tt.offset)
		}
		if got.String() != strings.Replace(tt.in, "Z", "Z", 1) {
			t.Errorf("String() = %q, want the received form %q", got.String(), tt.in)
		}
	}
	for _, bad := range []string{"yesterday", "2026-11-22", "2026-11-22T10:02:41", "22.11.2026 10:02"} {
		if _, err := ParseTime(bad); err == nil {
			t.Errorf("ParseTime(%q): want an error", bad)
		}
	}
}

func TestDecodePageFixture(t *testing.T) {
	p, err := DecodePage(fixture(t, "search-page.json"))
	if err != nil {
		t.Fatal(err)
	}
	if p.TotalsCount != 4 || p.Page != 1 || !p.IsLastPage || p.LastPageNumber != 1 || p.ItemsPerPage != 250 || p.FirstOnPage != 1 || p.LastOnPage != 4 {
		t.Errorf("envelope = %+v", p)
	}
	if len(p.Orders) != 4 || len(p.Bad) != 0 {
		t.Fatalf("orders %d bad %d, want 4 and 0", len(p.Orders), len(p.Bad))
	}
	o := p.Orders[1]
	if o.ID != 2302 || o.StatusID.String() != "5.1" || o.ReferrerID.String() != "4.01" || o.OwnerID != "" ||
		o.LockStatus != "permanentlyLocked" || o.LocationID != "1" || o.PlentyID != 41523 || o.TypeID != 1 {
		t.Errorf("entry 2302 = %+v", o)
	}
	if p.Orders[2].LocationID != "1" || p.Orders[2].StatusID.String() != "11.1" {
		t.Errorf("entry 2307: locationId as a number must decode to \"1\", status 11.1; got %+v", p.Orders[2])
	}
	if p.Orders[3].StatusID.String() != "7.01" {
		t.Errorf("7.01 must keep its text, got %q", p.Orders[3].StatusID)
	}
	if !p.Orders[0].UpdatedAt.Equal(p.Orders[1].UpdatedAt.Time) {
		t.Error("two orders share one updatedAt second in the fixture")
	}
	var raw map[string]any
	if err := json.Unmarshal(o.Raw, &raw); err != nil || raw["id"] != float64(2302) {
		t.Errorf("Raw must hold the entry verbatim: %s", o.Raw)
	}
	if !strings.Contains(string(o.Raw), `"statusId":5.1`) {
		t.Errorf("Raw lost the number's form: %s", o.Raw)
	}
}

func TestDecodePageStrings(t *testing.T) {
	p, err := DecodePage(fixture(t, "search-page-strings.json"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Page != 2 || p.ItemsPerPage != 2 || len(p.Orders) != 1 {
		t.Fatalf("envelope %+v", p)
	}
	o := p.Orders[0]
	if o.StatusID.String() != "5.7" || o.ReferrerID.String() != "2.08" || !o.CreatedAt.IsZero() {
		t.Errorf("entry = %+v: want status 5.7, referrer 2.08, zero createdAt", o)
	}
	if _, off := o.UpdatedAt.Zone(); off != 7200 {
		t.Errorf("updatedAt offset %d, want +02:00 kept", off)
	}
}

func TestDecodePageBadEntry(t *testing.T) {
	p, err := DecodePage(fixture(t, "search-page-bad-entry.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Orders) != 2 || p.Orders[0].ID != 3001 || p.Orders[1].ID != 3003 {
		t.Fatalf("good entries around the bad one must survive: %+v", p.Orders)
	}
	if len(p.Bad) != 1 {
		t.Fatalf("bad = %v", p.Bad)
	}
	b := p.Bad[0]
	if b.Index != 1 || b.ID != `"not-a-number"` || !strings.Contains(string(b.Raw), "oops") {
		t.Errorf("bad entry report = %+v", b)
	}
	if !strings.Contains(b.Error(), "not-a-number") {
		t.Errorf("error text must name the id: %s", b.Error())
	}
}

func TestDecodePageEmpty(t *testing.T) {
	p, err := DecodePage(fixture(t, "search-page-empty.json"))
	if err != nil {
		t.Fatal(err)
	}
	if p.TotalsCount != 0 || len(p.Orders) != 0 || p.ItemsPerPage != 50 {
		t.Errorf("empty page = %+v", p)
	}
}

func TestDecodePageGarbage(t *testing.T) {
	good := string(fixture(t, "search-page.json"))
	for name, body := range map[string]string{
		"truncated":    good[:len(good)/2],
		"html":         "<html><body><h1>502 Bad Gateway</h1></body></html>",
		"empty":        "",
		"not envelope": `{"data":[]}`,
		"array":        `[1,2,3]`,
		"error body":   `{"error":{"message":"short period read limit reached","code":429}}`,
		"entries obj":  `{"totalsCount":1,"entries":{"id":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodePage([]byte(body))
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("DecodePage = %v, want a *DecodeError", err)
			}
		})
	}
}

// The page decoder reads what encoding/json reads: escaped keys, keys in
// another case, the last of repeated keys (also a repeated "entries").
func TestDecodePageReadsWhatEncodingJSONReads(t *testing.T) {
	const at = `"updatedAt":"2026-11-22T10:00:00+01:00"`
	tests := []struct {
		name, body string
		ids        []int64  // the orders, in order
		status     []string // their statusId
		bad        int
	}{
		{"escaped key", `{"totalsCount":1,"entries":[{"id":1,"st\u0061tusId":9,` + at + `}]}`, []int64{1}, []string{"9"}, 0},
		{"escaped entries key", `{"totalsCount":1,"entr\u0069es":[{"id":1,` + at + `}]}`, []int64{1}, []string{""}, 0},
		{"key in another case", `{"totalsCount":1,"entries":[{"ID":1,"STATUSID":"5.1",` + at + `}]}`, []int64{1}, []string{"5.1"}, 0},
		{"repeated entries: the last counts", `{"totalsCount":1,"entries":[{"id":1,` + at + `}],"entries":[{"id":2,` + at + `}]}`, []int64{2}, []string{""}, 0},
		{"repeated entries, a longer first", `{"totalsCount":1,"entries":[{"id":1,` + at + `},{"id":3,` + at + `}],"entries":[{"id":2,` + at + `}]}`, []int64{2}, []string{""}, 0},
		{"repeated field in an entry", `{"totalsCount":1,"entries":[{"id":1,"statusId":5,"statusId":6,` + at + `}]}`, []int64{1}, []string{"6"}, 0},
		{"repeated totalsCount", `{"totalsCount":7,"totalsCount":1,"entries":[{"id":1,` + at + `}]}`, []int64{1}, []string{""}, 0},
		{"bad entry between good ones", `{"totalsCount":3,"entries":[{"id":1,` + at + `},{"id":2,"statusId":{},` + at + `},{"id":3,` + at + `}]}`, []int64{1, 3}, []string{"", ""}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := DecodePage([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			var ids []int64
			var status []string
			for _, o := range p.Orders {
				ids = append(ids, o.ID)
				status = append(status, o.StatusID.String())
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.ids) || fmt.Sprint(status) != fmt.Sprint(tt.status) || len(p.Bad) != tt.bad {
				t.Errorf("orders %v statuses %q bad %d; want %v %q %d", ids, status, len(p.Bad), tt.ids, tt.status, tt.bad)
			}
			if p.TotalsCount != int64(len(tt.ids)+tt.bad) {
				t.Errorf("totalsCount %d", p.TotalsCount)
			}
			// The same as encoding/json's own reading of the entries.
			var ref struct {
				Entries []json.RawMessage `json:"entries"`
			}
			if err := json.Unmarshal([]byte(tt.body), &ref); err != nil || len(ref.Entries) != len(p.Orders)+len(p.Bad) {
				t.Errorf("encoding/json reads %d entries (%v), the decoder %d", len(ref.Entries), err, len(p.Orders)+len(p.Bad))
			}
		})
	}
}

func TestDecodeOrderTypes(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"id as string", `{"id":"42","updatedAt":"2026-11-22T10:02:41+01:00"}`, true},
		{"id as float integer", `{"id":42.0,"updatedAt":"2026-11-22T10:02:41+01:00"}`, true},
		{"id fraction", `{"id":42.5,"updatedAt":"2026-11-22T10:02:41+01:00"}`, false},
		{"no id", `{"updatedAt":"2026-11-22T10:02:41+01:00"}`, false},
		{"no updatedAt", `{"id":42}`, false},
		{"status object", `{"id":42,"statusId":{},"updatedAt":"2026-11-22T10:02:41+01:00"}`, false},
		{"status bool", `{"id":42,"statusId":true,"updatedAt":"2026-11-22T10:02:41+01:00"}`, false},
		{"owner number", `{"id":42,"ownerId":7,"updatedAt":"2026-11-22T10:02:41+01:00"}`, true},
		{"owner object", `{"id":42,"ownerId":{},"updatedAt":"2026-11-22T10:02:41+01:00"}`, false},
		{"bad time", `{"id":42,"updatedAt":"now"}`, false},
		{"unknown fields", `{"id":42,"updatedAt":"2026-11-22T10:02:41+01:00","orderItems":[{"id":1}],"x":null}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := DecodeOrder([]byte(tt.in))
			if (err == nil) != tt.ok {
				t.Fatalf("DecodeOrder = %+v, %v; want ok=%v", o, err, tt.ok)
			}
			if tt.ok && o.ID != 42 {
				t.Errorf("id = %d", o.ID)
			}
		})
	}
}

func BenchmarkDecodePage(b *testing.B) {
	// 250 entries shaped like the fixture's.
	one := `{"id":%d,"referrerId":1,"roundTotalsOnly":true,"numberOfDecimals":2,"plentyId":41523,"typeId":1,"lockStatus":"unlocked","locationId":"1","createdAt":"2026-11-20T09:14:03+01:00","updatedAt":"2026-11-22T10:02:41+01:00","statusId":5.1,"ownerId":"3"}`
	var sb strings.Builder
	sb.WriteString(`{"page":1,"totalsCount":250,"isLastPage":true,"lastPageNumber":1,"firstOnPage":1,"lastOnPage":250,"itemsPerPage":250,"entries":[`)
	for i := range 250 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, one, 1000+i)
	}
	sb.WriteString("]}")
	body := []byte(sb.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := DecodePage(body); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(250*float64(b.N)/b.Elapsed().Seconds(), "orders/s")
}
