package plenty

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The reference decoders: the straightforward encoding/json versions that
// the hand-written scanner must agree with.

func decodeOrderReference(raw json.RawMessage) (Order, error) {
	var w wireOrder
	if err := json.Unmarshal(raw, &w); err != nil {
		return Order{}, err
	}
	return w.order(raw)
}

type wireEnvelope struct {
	Page           FlexInt           `json:"page"`
	TotalsCount    *FlexInt          `json:"totalsCount"`
	IsLastPage     bool              `json:"isLastPage"`
	LastPageNumber FlexInt           `json:"lastPageNumber"`
	FirstOnPage    FlexInt           `json:"firstOnPage"`
	LastOnPage     FlexInt           `json:"lastOnPage"`
	ItemsPerPage   FlexInt           `json:"itemsPerPage"`
	Entries        []json.RawMessage `json:"entries"`
}

func decodePageReference(body []byte) (*Page, error) {
	var w wireEnvelope
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, err
	}
	if w.TotalsCount == nil || w.Entries == nil {
		return nil, errors.New("not an envelope")
	}
	p := &Page{Page: int64(w.Page), TotalsCount: int64(*w.TotalsCount), IsLastPage: w.IsLastPage, LastPageNumber: int64(w.LastPageNumber),
		FirstOnPage: int64(w.FirstOnPage), LastOnPage: int64(w.LastOnPage), ItemsPerPage: int64(w.ItemsPerPage)}
	for i, raw := range w.Entries {
		o, err := decodeOrderReference(raw)
		if err != nil {
			p.Bad = append(p.Bad, EntryError{Index: i, Raw: raw, Err: err})
			continue
		}
		p.Orders = append(p.Orders, o)
	}
	return p, nil
}

func sameOrder(a, b Order) bool {
	return a.ID == b.ID && a.StatusID.String() == b.StatusID.String() && a.ReferrerID.String() == b.ReferrerID.String() &&
		a.PlentyID == b.PlentyID && a.TypeID == b.TypeID && a.LockStatus == b.LockStatus && a.LocationID == b.LocationID &&
		a.OwnerID == b.OwnerID && a.CreatedAt.Equal(b.CreatedAt.Time) && a.UpdatedAt.Equal(b.UpdatedAt.Time) && string(a.Raw) == string(b.Raw)
}

// comparePages checks the scanner against encoding/json on one body. The
// scanner may refuse what encoding/json accepts only where encoding/json is
// lax (keys matched regardless of case, invalid UTF-8); everything both
// accept must decode to the same values.
func comparePages(t *testing.T, body []byte) {
	t.Helper()
	fast, ferr := DecodePage(body)
	ref, rerr := decodePageReference(body)
	if ferr == nil && rerr != nil && !hasCaseVariantKey(body) {
		t.Fatalf("the scanner accepts what encoding/json refuses (%v): %q", rerr, body)
	}
	if ferr != nil || rerr != nil || hasCaseVariantKey(body) {
		return
	}
	if fast.Page != ref.Page || fast.TotalsCount != ref.TotalsCount || fast.IsLastPage != ref.IsLastPage ||
		fast.LastPageNumber != ref.LastPageNumber || fast.ItemsPerPage != ref.ItemsPerPage || fast.FirstOnPage != ref.FirstOnPage || fast.LastOnPage != ref.LastOnPage {
		t.Fatalf("envelopes differ: %+v vs %+v", fast, ref)
	}
	if len(fast.Orders)+len(fast.Bad) != len(ref.Orders)+len(ref.Bad) {
		t.Fatalf("entry counts differ")
	}
	refByIndex := map[int]Order{}
	for i, j := 0, 0; i < len(ref.Orders)+len(ref.Bad); i++ {
		if j < len(ref.Bad) && ref.Bad[j].Index == i {
			j++
			continue
		}
		refByIndex[i] = ref.Orders[i-j]
	}
	for i, j := 0, 0; i < len(fast.Orders)+len(fast.Bad); i++ {
		if j < len(fast.Bad) && fast.Bad[j].Index == i {
			j++
			continue
		}
		r, ok := refByIndex[i]
		if !ok {
			t.Fatalf("entry %d: the scanner decodes what encoding/json refuses: %s", i, fast.Orders[i-j].Raw)
		}
		if !sameOrder(fast.Orders[i-j], r) {
			t.Fatalf("entry %d differs:\n%+v\n%+v", i, fast.Orders[i-j], r)
		}
	}
}

func TestScannerMatchesReference(t *testing.T) {
	for _, f := range []string{"search-page.json", "search-page-strings.json", "search-page-empty.json", "search-page-bad-entry.json"} {
		comparePages(t, fixture(t, f))
	}
	for _, body := range []string{
		`{"totalsCount":1,"entries":[{"id":1,"updatedAt":"2026-11-22T10:00:00+01:00","lockStatus":"a\u00e9\n"}]}`,
		`{"totalsCount":1,"entries":[{"id":1,"id":2,"updatedAt":"2026-11-22T10:00:00+01:00"}]}`,
		`{"totalsCount":1,"entries":[{"id":1,"updatedAt":"2026-11-22T10:00:00+01:00","x":{"y":[1,2,{"z":null}]}}]}`,
		`{"totalsCount":1,"entries":[1, "x", null, [], {"id":1,"updatedAt":"2026-11-22T10:00:00+01:00"}]}`,
		` {"entries":[],"totalsCount":0} `,
		`{"totalsCount":1,"entries":[{"id":1,"updatedAt":"2026-11-22T10:00:00+01:00"}]} x`,
		`{"totalsCount":01,"entries":[]}`,
		`{"totalsCount":1,"entries":[{"id":-0,"updatedAt":"2026-11-22T10:00:00+01:00"}]}`,
	} {
		comparePages(t, []byte(body))
	}
}

func FuzzScannerMatchesReference(f *testing.F) {
	addFixtures(f, "search-page.json", "search-page-strings.json", "search-page-empty.json", "search-page-bad-entry.json")
	f.Fuzz(func(t *testing.T, body []byte) { comparePages(t, body) })
}

var knownKeys = strings.Fields("id statusId referrerId plentyId typeId lockStatus locationId ownerId createdAt updatedAt " +
	"page totalsCount isLastPage lastPageNumber firstOnPage lastOnPage itemsPerPage entries")

// hasCaseVariantKey reports a key that encoding/json would match to one of
// ours regardless of case (the scanner, like the service, does not).
func hasCaseVariantKey(body []byte) bool {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, sub := range v {
				for _, known := range knownKeys {
					if k != known && strings.EqualFold(k, known) {
						return true
					}
				}
				if walk(sub) {
					return true
				}
			}
		case []any:
			for _, sub := range v {
				if walk(sub) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
