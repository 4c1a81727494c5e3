package plentysim

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/refdata"
)

func TestRelations(t *testing.T) {
	h := newHarness(t, Config{})
	h.sim.AddOrder(Order{ID: 1000,
		Addresses: []Address{{ID: 7, TypeID: 1, Name: "Ada \"Q\" Lovelace", Street: "Hauptstraße 1", PostalCode: "27498", Town: "Helgoland", CountryID: 255}},
		Amounts:   []Amount{{Currency: "EUR", IsSystemCurrency: true, GrossCents: 11990, PaidCents: 11990}, {Currency: "CHF", ExchangeRate: "0.94", GrossCents: 5}},
		Payments:  []Payment{{ID: 3, MopID: 6000, Status: 3, Currency: "EUR", AmountCents: 11990}},
	})
	h.sim.AddOrder(Order{ID: 1001}) // no relations: empty lists
	h.sim.AddOrder(Order{ID: 1002, Addresses: []Address{{ID: 8, CountryID: 111}},
		Raw: map[string]string{"payments": `{"9":{"status":"3"}}`, "amounts": `"EUR"`, "extra": `[1,{"a":null}]`}})
	tok := h.login()

	wantAddresses := `[{"id":7,"name1":"","name2":"Ada \"Q\" Lovelace","address1":"Hauptstraße 1","postalCode":"27498","town":"Helgoland","countryId":255,"pivot":{"orderId":1000,"addressId":7,"typeId":1}}]`
	wantAmounts := `[{"id":10001,"orderId":1000,"isSystemCurrency":true,"isNet":false,"currency":"EUR","exchangeRate":1,"grossTotal":119.90,"invoiceTotal":119.90,"paidAmount":119.90},` +
		`{"id":10002,"orderId":1000,"isSystemCurrency":false,"isNet":false,"currency":"CHF","exchangeRate":0.94,"grossTotal":0.05,"invoiceTotal":0.05,"paidAmount":0.00}]`
	wantPayments := `[{"id":3,"amount":119.90,"mopId":6000,"status":3,"currency":"EUR","isSystemCurrency":true}]`

	for _, q := range []string{"with=addresses,amounts,payments", "with[]=addresses&with[]=amounts&with[]=payments", "with=payments,%20amounts,addresses,unknownRelation"} {
		env := h.search(tok, "sortOrder=asc&"+q, nil)
		e := env.Entries[0]
		for key, want := range map[string]string{"addresses": wantAddresses, "amounts": wantAmounts, "payments": wantPayments} {
			if got := string(e[key]); got != want {
				t.Errorf("%s: %s\n got %s\nwant %s", q, key, got, want)
			}
		}
		if e["orderItems"] != nil {
			t.Errorf("%s: orderItems rendered without being asked for", q)
		}
		for _, key := range []string{"addresses", "amounts", "payments"} {
			if got := string(env.Entries[1][key]); got != "[]" {
				t.Errorf("%s: order without %s renders %s, want []", q, key, got)
			}
		}
		// Raw members: verbatim, in place of the relation of the same name.
		e = env.Entries[2]
		if string(e["payments"]) != `{"9":{"status":"3"}}` || string(e["amounts"]) != `"EUR"` || string(e["extra"]) != `[1,{"a":null}]` {
			t.Errorf("%s: raw members %s %s %s", q, e["payments"], e["amounts"], e["extra"])
		}
		if string(e["addresses"]) != `[{"id":8,"name1":"","name2":"","address1":"","postalCode":"","town":"","countryId":111,"pivot":{"orderId":1002,"addressId":8,"typeId":0}}]` {
			t.Errorf("%s: addresses %s", q, e["addresses"])
		}
	}

	// Lazy loaded by default: no relation; one asked for renders alone.
	env := h.search(tok, "sortOrder=asc", nil)
	for _, key := range []string{"addresses", "amounts", "payments"} {
		if env.Entries[0][key] != nil {
			t.Errorf("lazy loaded entry has %s", key)
		}
	}
	if string(env.Entries[2]["payments"]) == "" {
		t.Error("raw members are rendered on every search")
	}
	env = h.search(tok, "sortOrder=asc&with=amounts", nil)
	if env.Entries[0]["amounts"] == nil || env.Entries[0]["addresses"] != nil || env.Entries[0]["payments"] != nil {
		t.Errorf("with=amounts: %v", env.Entries[0])
	}
}

// TestGeneratedRelations: a generated shop's relations carry codes of the
// reference lists, vary, and are the same for the same seed.
func TestGeneratedRelations(t *testing.T) {
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	gen := func(seed int64) []Order {
		s := New(Config{Seed: seed})
		s.Generate(500, from, from.Add(24*time.Hour))
		return s.Orders()
	}
	orders := gen(7)
	countries, currencies, statuses := map[int]bool{}, map[string]bool{}, map[int]bool{}
	paid := 0
	for _, o := range orders {
		if len(o.Addresses) != 2 || len(o.Amounts) == 0 || !o.Amounts[0].IsSystemCurrency {
			t.Fatalf("order %d: addresses %v amounts %v", o.ID, o.Addresses, o.Amounts)
		}
		for _, a := range o.Addresses {
			if _, ok := refdata.CountryByID(a.CountryID); !ok {
				t.Errorf("order %d: country %d is not on the list", o.ID, a.CountryID)
			}
			countries[a.CountryID] = true
		}
		for _, a := range o.Amounts {
			if !refdata.IsCurrency(a.Currency) {
				t.Errorf("order %d: currency %q is not on the list", o.ID, a.Currency)
			}
			currencies[a.Currency] = true
		}
		for _, p := range o.Payments {
			if _, ok := refdata.PaymentStatus(p.Status); !ok {
				t.Errorf("order %d: payment status %d is not on the list", o.ID, p.Status)
			}
			statuses[p.Status] = true
		}
		if len(o.Payments) > 0 {
			paid++
		}
	}
	if len(countries) < 8 || len(currencies) < 4 || len(statuses) < 8 || paid < 100 || paid > 450 {
		t.Errorf("little variety: %d countries, %d currencies, %d payment statuses, %d of 500 orders paid", len(countries), len(currencies), len(statuses), paid)
	}
	if again := gen(7); !reflect.DeepEqual(again, orders) {
		t.Error("the same seed generated another shop")
	}

	// The rendered page is valid JSON with the relations.
	h := newHarness(t, Config{Seed: 7})
	h.sim.Generate(50, from, from.Add(time.Hour))
	env := h.search(h.login(), "with=addresses,amounts,payments&itemsPerPage=50", nil)
	for _, e := range env.Entries {
		var rel struct {
			Addresses []struct{ CountryID int } `json:"addresses"`
			Amounts   []struct{ Currency string }
			Payments  []struct{ Status int }
		}
		b, _ := json.Marshal(e)
		if err := json.Unmarshal(b, &rel); err != nil || len(rel.Addresses) != 2 || len(rel.Amounts) == 0 {
			t.Fatalf("entry %s: %v", b, err)
		}
	}
}
