package refdata_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/orderwatch/orderwatch/refdata"
)

func TestCounts(t *testing.T) {
	tests := []struct {
		name string
		got  int
		want int
	}{
		{"languages", len(refdata.Languages()), 19},
		{"countries", len(refdata.Countries()), 261}, // IDs 0..265 minus 5 unused
		{"units", len(refdata.Units()), 52},
		{"currencies", len(refdata.Currencies()), 38},
		{"payment statuses", len(refdata.PaymentStatuses()), 10},
		{"stock reasons", len(refdata.StockReasons()), 89},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %d entries, want %d", tt.name, tt.got, tt.want)
		}
	}
}

// TestListsSortedAndUnique checks the ordering promised by the list
// functions, which also rules out duplicate keys.
func TestListsSortedAndUnique(t *testing.T) {
	strictly := func(name string, keys []string) {
		t.Helper()
		for i := 1; i < len(keys); i++ {
			if keys[i-1] >= keys[i] {
				t.Errorf("%s: %q before %q: not strictly ascending", name, keys[i-1], keys[i])
			}
		}
	}
	strictlyInt := func(name string, keys []int) {
		t.Helper()
		for i := 1; i < len(keys); i++ {
			if keys[i-1] >= keys[i] {
				t.Errorf("%s: %d before %d: not strictly ascending", name, keys[i-1], keys[i])
			}
		}
	}
	var langs []string
	for _, l := range refdata.Languages() {
		langs = append(langs, l.Code)
	}
	strictly("languages", langs)
	strictly("currencies", refdata.Currencies())

	var ids []int
	for _, c := range refdata.Countries() {
		ids = append(ids, c.ID)
	}
	strictlyInt("countries", ids)
	ids = ids[:0]
	for _, u := range refdata.Units() {
		ids = append(ids, u.ID)
	}
	strictlyInt("units", ids)
	ids = ids[:0]
	for _, p := range refdata.PaymentStatuses() {
		ids = append(ids, p.ID)
	}
	strictlyInt("payment statuses", ids)
	ids = ids[:0]
	for _, r := range refdata.StockReasons() {
		ids = append(ids, r.ID)
	}
	strictlyInt("stock reasons", ids)
}

func TestLanguage(t *testing.T) {
	tests := []struct {
		code   string
		want   string
		wantOK bool
	}{
		{"vn", "Vietnamese", true},
		{"VN", "Vietnamese", true},
		{"bg", "Bulgarian", true},
		{"cn", "Chinese", true},
		{"cz", "Czech", true},
		{"nn", "Norwegian", true},
		{"se", "Swedish", true},
		{"De", "German", true},
		{"vi", "", false}, // ISO 639-1 for Vietnamese; the service uses "vn"
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := refdata.Language(tt.code)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Language(%q) = %q, %v; want %q, %v", tt.code, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestCountryByID(t *testing.T) {
	tests := []struct {
		id     int
		want   refdata.Country
		wantOK bool
	}{
		{0, refdata.Country{ID: 0, ISO: "", Name: "Unknown"}, true},
		{1, refdata.Country{ID: 1, ISO: "DE"}, true},
		{12, refdata.Country{ID: 12, ISO: "GB"}, true},
		{37, refdata.Country{ID: 37, ISO: "IC", Name: "Canary Islands", Territory: true}, true},
		{42, refdata.Country{ID: 42, ISO: "EA", Name: "Ceuta", Territory: true}, true},
		{43, refdata.Country{ID: 43, ISO: "EA", Name: "Melilla", Territory: true}, true},
		{45, refdata.Country{ID: 45, ISO: "XZ", Name: "Kosovo"}, true},
		{64, refdata.Country{ID: 64, ISO: "GR", Name: "Greek Islands", Territory: true}, true},
		{65, refdata.Country{ID: 65, ISO: "ES", Name: "Balearic Islands", Territory: true}, true},
		{184, refdata.Country{ID: 184, ISO: "AN"}, true},
		{255, refdata.Country{ID: 255, ISO: "DE", Name: "Helgoland", Territory: true}, true},
		{256, refdata.Country{ID: 256, ISO: "DE", Name: "Buesingen", Territory: true}, true},
		{258, refdata.Country{ID: 258, ISO: "CUW"}, true},
		{259, refdata.Country{ID: 259, ISO: "SXM"}, true},
		{260, refdata.Country{ID: 260, ISO: "BES"}, true},
		{261, refdata.Country{ID: 261, ISO: "BL"}, true},
		{262, refdata.Country{ID: 262, ISO: "IT", Name: "Livigno", Territory: true}, true},
		{263, refdata.Country{ID: 263, ISO: "IT", Name: "Campione d'Italia", Territory: true}, true},
		{264, refdata.Country{ID: 264, ISO: "IT", Name: "Lake Lugano from Ponte Tresa to Porto Ceresio", Territory: true}, true},
		{265, refdata.Country{ID: 265, ISO: "XI"}, true},
		{111, refdata.Country{}, false},
		{157, refdata.Country{}, false},
		{167, refdata.Country{}, false},
		{251, refdata.Country{}, false},
		{257, refdata.Country{}, false},
		{266, refdata.Country{}, false},
		{-1, refdata.Country{}, false},
	}
	for _, tt := range tests {
		got, ok := refdata.CountryByID(tt.id)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("CountryByID(%d) = %+v, %v; want %+v, %v", tt.id, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestCountryTerritoriesAndNames(t *testing.T) {
	territories := []int{37, 42, 43, 64, 65, 255, 256, 262, 263, 264}
	named := append([]int{0, 45}, territories...)
	for _, c := range refdata.Countries() {
		if got, want := c.Territory, slices.Contains(territories, c.ID); got != want {
			t.Errorf("country %d: Territory = %v, want %v", c.ID, got, want)
		}
		if got, want := c.Name != "", slices.Contains(named, c.ID); got != want {
			t.Errorf("country %d: has name %q, want named = %v", c.ID, c.Name, want)
		}
		if c.ID != 0 && c.ISO == "" {
			t.Errorf("country %d: empty ISO code", c.ID)
		}
	}
}

func TestCountryIDsByISO(t *testing.T) {
	tests := []struct {
		iso  string
		want []int
	}{
		{"DE", []int{1, 255, 256}},
		{"de", []int{1, 255, 256}},
		{"EA", []int{42, 43}},
		{"IT", []int{15, 262, 263, 264}},
		{"ES", []int{8, 65}},
		{"GR", []int{13, 64}},
		{"GB", []int{12}},
		{"IC", []int{37}},
		{"XZ", []int{45}},
		{"CUW", []int{258}},
		{"cuw", []int{258}},
		{"XI", []int{265}},
		{"ZZ", nil},
		{"", nil},
		{"none", nil},
	}
	for _, tt := range tests {
		if got := refdata.CountryIDsByISO(tt.iso); !slices.Equal(got, tt.want) {
			t.Errorf("CountryIDsByISO(%q) = %v, want %v", tt.iso, got, tt.want)
		}
	}
}

// TestCountryIDsByISORoundTrip checks that every country is found again
// through its code.
func TestCountryIDsByISORoundTrip(t *testing.T) {
	for _, c := range refdata.Countries() {
		if c.ISO == "" {
			continue
		}
		if ids := refdata.CountryIDsByISO(c.ISO); !slices.Contains(ids, c.ID) {
			t.Errorf("CountryIDsByISO(%q) = %v, missing %d", c.ISO, ids, c.ID)
		}
	}
}

func TestIsUnusedCountryID(t *testing.T) {
	unused := []int{111, 157, 167, 251, 257}
	for id := -1; id <= 300; id++ {
		want := slices.Contains(unused, id)
		if got := refdata.IsUnusedCountryID(id); got != want {
			t.Errorf("IsUnusedCountryID(%d) = %v, want %v", id, got, want)
		}
		// Within 0..265 every ID is either used or unused, never both.
		_, found := refdata.CountryByID(id)
		if inRange := id >= 0 && id <= 265; found != (inRange && !want) {
			t.Errorf("CountryByID(%d) found = %v, unused = %v", id, found, want)
		}
	}
}

func TestUnitByID(t *testing.T) {
	tests := []struct {
		id     int
		want   refdata.Unit
		wantOK bool
	}{
		{1, refdata.Unit{ID: 1, Code: "C62", Name: "Piece"}, true},
		{6, refdata.Unit{ID: 6, Code: "DPC", Name: "12 pieces/dozen"}, true},
		{12, refdata.Unit{ID: 12, Code: "D64", Name: "Block"}, true},
		{13, refdata.Unit{ID: 13, Code: "PD", Name: "Block"}, true},
		{37, refdata.Unit{ID: 37, Code: "D97", Name: "Pallet/unit load"}, true},
		{41, refdata.Unit{ID: 41, Code: "SCM", Name: "Square centimetre (non-standard)"}, true},
		{43, refdata.Unit{ID: 43, Code: "RO", Name: "Role"}, true},
		{52, refdata.Unit{ID: 52, Code: "INH", Name: "Inch"}, true},
		{0, refdata.Unit{}, false},
		{53, refdata.Unit{}, false},
	}
	for _, tt := range tests {
		got, ok := refdata.UnitByID(tt.id)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("UnitByID(%d) = %+v, %v; want %+v, %v", tt.id, got, ok, tt.want, tt.wantOK)
		}
	}
	for i, u := range refdata.Units() {
		if u.ID != i+1 {
			t.Errorf("Units()[%d].ID = %d, want %d (IDs are 1..52 without gaps)", i, u.ID, i+1)
		}
	}
}

func TestIsCurrency(t *testing.T) {
	tests := []struct {
		code string
		want bool
	}{
		{"EUR", true},
		{"eur", true},
		{"AED", true},
		{"ZAR", true},
		{"HRK", true},
		{"XCD", true},
		{"Usd", true},
		{"XXX", false},
		{"EU", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := refdata.IsCurrency(tt.code); got != tt.want {
			t.Errorf("IsCurrency(%q) = %v, want %v", tt.code, got, tt.want)
		}
	}
}

func TestCurrencyByCode(t *testing.T) {
	tests := []struct {
		code, wantCode, wantName string
		wantOK                   bool
	}{
		{"EUR", "EUR", "Euro", true},
		{"eur", "EUR", "Euro", true},
		{"GBP", "GBP", "Pound Sterling", true},
		{"USD", "USD", "US Dollar", true},
		{"HRK", "HRK", "Kuna", true},
		{"XXX", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		c, ok := refdata.CurrencyByCode(tt.code)
		if c.Code != tt.wantCode || c.Name != tt.wantName || ok != tt.wantOK {
			t.Errorf("CurrencyByCode(%q) = %+v, %v; want %q %q, %v", tt.code, c, ok, tt.wantCode, tt.wantName, tt.wantOK)
		}
	}
	for _, c := range refdata.CurrencyInfos() {
		if len(c.Code) != 3 || strings.ToUpper(c.Code) != c.Code || c.Name == "" {
			t.Errorf("currency %+v: want an upper-case three-letter code and a name", c)
		}
	}
}

func TestPaymentStatus(t *testing.T) {
	tests := []struct {
		id     int
		want   string
		wantOK bool
	}{
		{1, "Awaiting approval", true},
		{3, "Captured", true},
		{10, "Partially refunded", true},
		{0, "", false},
		{11, "", false},
	}
	for _, tt := range tests {
		got, ok := refdata.PaymentStatus(tt.id)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("PaymentStatus(%d) = %q, %v; want %q, %v", tt.id, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestStockReason(t *testing.T) {
	tests := []struct {
		id     int
		want   string
		wantOK bool
	}{
		{0, "Undefined", true},
		{2, "Initial value (new log)", true},
		{302, "Stock correction stocktaking", true},
		{402, "Stock correction stocktaking", true}, // same text as 302 in the spec
		{610, "Quantity, purchase price and RRP changed", true},
		{612, "Item registration cancelled", true},
		{103, "", false},
		{303, "", false},
		{613, "", false},
		{-1, "", false},
	}
	for _, tt := range tests {
		got, ok := refdata.StockReason(tt.id)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("StockReason(%d) = %q, %v; want %q, %v", tt.id, got, ok, tt.want, tt.wantOK)
		}
	}
}

// TestReturnedSlicesAreCopies mutates every returned slice and checks that
// the tables, and thus the lookups, are unaffected.
func TestReturnedSlicesAreCopies(t *testing.T) {
	l := refdata.Languages()
	l[0].Name = "changed"
	if got := refdata.Languages()[0].Name; got == "changed" {
		t.Error("Languages returned the table itself")
	}

	c := refdata.Countries()
	c[1].ISO = "changed"
	if got, _ := refdata.CountryByID(1); got.ISO != "DE" {
		t.Errorf("Countries mutation leaked: CountryByID(1).ISO = %q", got.ISO)
	}
	if got := refdata.Countries()[1].ISO; got != "DE" {
		t.Errorf("Countries mutation leaked: Countries()[1].ISO = %q", got)
	}

	ids := refdata.CountryIDsByISO("DE")
	ids[0] = 999
	_ = append(ids[:1], 998) // must not write into a shared backing array
	if got := refdata.CountryIDsByISO("DE"); !slices.Equal(got, []int{1, 255, 256}) {
		t.Errorf("CountryIDsByISO mutation leaked: %v", got)
	}

	u := refdata.Units()
	u[0].Code = "changed"
	if got := refdata.Units()[0].Code; got != "C62" {
		t.Errorf("Units mutation leaked: %q", got)
	}

	cur := refdata.Currencies()
	cur[0] = "changed"
	if got := refdata.Currencies()[0]; got != "AED" {
		t.Errorf("Currencies mutation leaked: %q", got)
	}

	p := refdata.PaymentStatuses()
	p[0].Name = "changed"
	if got := refdata.PaymentStatuses()[0].Name; got != "Awaiting approval" {
		t.Errorf("PaymentStatuses mutation leaked: %q", got)
	}

	s := refdata.StockReasons()
	s[0].Reason = "changed"
	if got := refdata.StockReasons()[0].Reason; got != "Undefined" {
		t.Errorf("StockReasons mutation leaked: %q", got)
	}
}

// specPath is the reference documentation the tables were transcribed
// from: a verbatim copy, kept in the module so the test stands alone.
var specPath = filepath.Join("testdata", "reference-code-lists.txt")

// sharedSpecPath is where the copy came from: the service documents kept
// next to the repository while it is developed. It may be absent.
var sharedSpecPath = filepath.Join("..", "..", "shared", "spec", "001_cea69128628fdcc7.txt")

// TestSpecCopyIsCurrent compares the copy in testdata with the service
// documents when they are next to the repository, so a newer list is noticed.
// Without them there is nothing to compare, and the test says so.
func TestSpecCopyIsCurrent(t *testing.T) {
	shared, err := os.ReadFile(sharedSpecPath)
	if errors.Is(err, fs.ErrNotExist) {
		t.Logf("%s is absent: the copy in %s is the reference", sharedSpecPath, specPath)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(own) != string(shared) {
		t.Errorf("%s differs from %s: copy the new list and update the tables", specPath, sharedSpecPath)
	}
}

// specSection returns the body of the "### title..." section of spec.
func specSection(t *testing.T, spec, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(spec, "\n### "+title)
	if !ok {
		t.Fatalf("spec: section %q not found", title)
	}
	_, body, _ := strings.Cut(rest, "\n") // drop the rest of the heading line
	body, _, _ = strings.Cut(body, "\n#")
	return strings.TrimSpace(body)
}

var pairStart = regexp.MustCompile(`(?:^|,\s+)(\d+)=`)

// specPairs parses an "1=a, 2=b, ..." list into id -> value. Values may
// contain commas as long as they are not followed by another "id=".
func specPairs(t *testing.T, list string) map[int]string {
	t.Helper()
	list = strings.TrimSuffix(strings.TrimSpace(list), ".")
	locs := pairStart.FindAllStringSubmatchIndex(list, -1)
	if len(locs) == 0 {
		t.Fatalf("spec: no id=value pairs in %q", list)
	}
	pairs := make(map[int]string, len(locs))
	for i, loc := range locs {
		id, err := strconv.Atoi(list[loc[2]:loc[3]])
		if err != nil {
			t.Fatal(err)
		}
		end := len(list)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		if _, dup := pairs[id]; dup {
			t.Errorf("spec: id %d listed twice", id)
		}
		pairs[id] = list[loc[1]:end]
	}
	return pairs
}

// lastParagraph returns the last blank-line separated paragraph of s.
func lastParagraph(s string) string {
	paras := strings.Split(s, "\n\n")
	return paras[len(paras)-1]
}

// TestTablesMatchSpec re-reads the reference documentation (testdata) and
// checks every list against the tables to guard the transcription.
func TestTablesMatchSpec(t *testing.T) {
	data, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	spec := string(data)

	t.Run("languages", func(t *testing.T) {
		body := specSection(t, spec, "Language codes")
		m := regexp.MustCompile("`([a-z]+)` ([A-Za-z]+)").FindAllStringSubmatch(body, -1)
		if len(m) != len(refdata.Languages()) {
			t.Errorf("spec has %d languages, table %d", len(m), len(refdata.Languages()))
		}
		for _, p := range m {
			if got, ok := refdata.Language(p[1]); !ok || got != p[2] {
				t.Errorf("language %q: table %q, %v; spec %q", p[1], got, ok, p[2])
			}
		}
	})

	t.Run("countries", func(t *testing.T) {
		body := specSection(t, spec, "Country IDs")
		pairs := specPairs(t, lastParagraph(body))
		if len(pairs) != len(refdata.Countries()) {
			t.Errorf("spec has %d countries, table %d", len(pairs), len(refdata.Countries()))
		}
		for id, v := range pairs {
			iso, name, _ := strings.Cut(v, " ")
			name = strings.TrimSuffix(strings.TrimPrefix(name, "("), ")")
			if iso == "none" {
				iso = ""
			}
			c, ok := refdata.CountryByID(id)
			if !ok || c.ISO != iso {
				t.Errorf("country %d: table %q, %v; spec %q", id, c.ISO, ok, iso)
			}
			if name != "" && c.Name != name {
				t.Errorf("country %d: table name %q; spec %q", id, c.Name, name)
			}
		}

		// Unused IDs, from "IDs 111, 157, 167, 251 and 257 are unused."
		m := regexp.MustCompile(`IDs ([\d, and]+) are unused`).FindStringSubmatch(body)
		if m == nil {
			t.Fatal("spec: unused country IDs sentence not found")
		}
		unused := regexp.MustCompile(`\d+`).FindAllString(m[1], -1)
		for _, s := range unused {
			id, _ := strconv.Atoi(s)
			if !refdata.IsUnusedCountryID(id) {
				t.Errorf("country %d: spec says unused, IsUnusedCountryID is false", id)
			}
			if _, listed := pairs[id]; listed {
				t.Errorf("country %d: spec says unused but lists it", id)
			}
		}
		for id := 0; id <= 265; id++ {
			_, listed := pairs[id]
			if listed == refdata.IsUnusedCountryID(id) {
				t.Errorf("country %d: listed = %v, unused = %v", id, listed, !listed)
			}
		}

		// Territory names, from "(territories): 37 is the Canary Islands, 42 Ceuta, ...".
		_, terr, ok := strings.Cut(body, "(territories): ")
		if !ok {
			t.Fatal("spec: territory sentence not found")
		}
		terr, _, _ = strings.Cut(terr, ". ")
		n := 0
		for _, item := range strings.Split(terr, ", ") {
			idStr, name, _ := strings.Cut(item, " ")
			name = strings.TrimPrefix(name, "is the ")
			id, err := strconv.Atoi(idStr)
			if err != nil {
				t.Fatalf("spec: bad territory item %q", item)
			}
			n++
			if c, _ := refdata.CountryByID(id); c.Name != name || !c.Territory {
				t.Errorf("territory %d: table %q (territory %v); spec %q", id, c.Name, c.Territory, name)
			}
		}
		var tableTerr int
		for _, c := range refdata.Countries() {
			if c.Territory {
				tableTerr++
			}
		}
		if n != tableTerr {
			t.Errorf("spec names %d territories, table marks %d", n, tableTerr)
		}
	})

	t.Run("units", func(t *testing.T) {
		pairs := specPairs(t, lastParagraph(specSection(t, spec, "Default unit IDs")))
		if len(pairs) != len(refdata.Units()) {
			t.Errorf("spec has %d units, table %d", len(pairs), len(refdata.Units()))
		}
		for id, v := range pairs {
			code, name, _ := strings.Cut(v, " ")
			u, ok := refdata.UnitByID(id)
			if !ok || u.Code != code || u.Name != name {
				t.Errorf("unit %d: table %q %q, %v; spec %q %q", id, u.Code, u.Name, ok, code, name)
			}
		}
	})

	t.Run("currencies", func(t *testing.T) {
		body := specSection(t, spec, "Supported currencies")
		_, list, _ := strings.Cut(body, ": ")
		codes := strings.Split(strings.TrimSuffix(list, "."), ", ")
		if !slices.Equal(codes, refdata.Currencies()) {
			t.Errorf("currencies: spec %v, table %v", codes, refdata.Currencies())
		}
	})

	t.Run("payment statuses", func(t *testing.T) {
		pairs := specPairs(t, lastParagraph(specSection(t, spec, "Payment status IDs")))
		if len(pairs) != len(refdata.PaymentStatuses()) {
			t.Errorf("spec has %d payment statuses, table %d", len(pairs), len(refdata.PaymentStatuses()))
		}
		for id, want := range pairs {
			if got, ok := refdata.PaymentStatus(id); !ok || got != want {
				t.Errorf("payment status %d: table %q, %v; spec %q", id, got, ok, want)
			}
		}
	})

	t.Run("stock reasons", func(t *testing.T) {
		pairs := specPairs(t, lastParagraph(specSection(t, spec, "Stock management reason IDs")))
		if len(pairs) != len(refdata.StockReasons()) {
			t.Errorf("spec has %d stock reasons, table %d", len(pairs), len(refdata.StockReasons()))
		}
		for id, want := range pairs {
			if got, ok := refdata.StockReason(id); !ok || got != want {
				t.Errorf("stock reason %d: table %q, %v; spec %q", id, got, ok, want)
			}
		}
	})
}
