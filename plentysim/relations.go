package plentysim

import (
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// The relations an order search returns when it is asked for them with
// with= (with=addresses,amounts,payments or with[]=addresses&with[]=...):
// the shapes real systems send, reduced to the fields that matter here. The
// service's documents show neither the values with= accepts nor the shapes
// of the relations; see docs/how-it-works.md, "What we assumed".

// Address is an address of an order, rendered under "addresses".
type Address struct {
	ID         int64
	TypeID     int // 1 billing, 2 delivery (rendered as pivot.typeId)
	Name       string
	Street     string
	PostalCode string
	Town       string
	CountryID  int // an id of the country ID list (1 = DE); rendered as given
}

// Amount is an amount of an order, rendered under "amounts": one in the
// system currency, and one in the order's currency when that differs.
type Amount struct {
	Currency         string // ISO 4217 code as the service sends it ("EUR"); rendered as given
	IsSystemCurrency bool
	ExchangeRate     string // decimal text; "" is 1
	GrossCents       int64  // grossTotal = invoiceTotal, in cents
	PaidCents        int64
}

// Payment is a payment of an order, rendered under "payments".
type Payment struct {
	ID          int64
	MopID       int    // method of payment id
	Status      int    // an id of the payment status list (1..10); rendered as given
	Currency    string // rendered as given
	AmountCents int64
}

// Relation names of with=.
const (
	RelAddresses = "addresses"
	RelAmounts   = "amounts"
	RelPayments  = "payments"
	RelItems     = "orderItems"
)

// relationSet is what a search renders besides the order's own fields.
type relationSet uint8

const (
	withItems relationSet = 1 << iota
	withAddresses
	withAmounts
	withPayments
)

// parseWith adds the relations named in one with= value (comma-separated;
// unknown names are ignored, as the service ignores them).
func (r *relationSet) parseWith(v string) {
	for rel := range strings.SplitSeq(v, ",") {
		switch strings.TrimSpace(rel) {
		case RelItems:
			*r |= withItems
		case RelAddresses:
			*r |= withAddresses
		case RelAmounts:
			*r |= withAmounts
		case RelPayments:
			*r |= withPayments
		}
	}
}

var (
	genCountries      = []int{1, 2, 4, 10, 12, 21, 15, 28, 255, 37, 23}
	genCountryWeights = []int{55, 10, 8, 5, 5, 4, 3, 3, 1, 1, 5}
	genTowns          = []string{"Berlin", "Wien", "Zürich", "Paris", "London", "Utrecht", "Milano", "Austin", "Helgoland", "Las Palmas", "Kraków"}
	genCurrencyOf     = map[int]string{4: "CHF", 12: "GBP", 28: "USD", 23: "PLN"}
	genRateOf         = map[string]string{"CHF": "0.94", "GBP": "0.86", "USD": "1.08", "PLN": "4.31"}
	genPayStatuses    = []int{3, 2, 1, 9, 4, 10, 5, 6, 7, 8}
	genPayWeights     = []int{50, 12, 12, 6, 5, 4, 4, 3, 2, 2}
	genNames          = []string{"Ada Lovelace", "Alan Turing", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov", "Ken Thompson"}
)

// generateRelations fills the relations of a generated order. They are
// drawn from their own generator, seeded with the server's seed and the
// order id, so the rest of a generated shop is what it was before
// relations existed, and an order's relations do not depend on the orders
// generated before it.
func (s *Server) generateRelations(o *Order) {
	rng := rand.New(rand.NewPCG(uint64(s.cfg.Seed), uint64(o.ID)^0x5e1a7104))
	billing := weighted(rng, genCountries, genCountryWeights)
	delivery := billing
	if rng.IntN(100) < 15 {
		delivery = weighted(rng, genCountries, genCountryWeights)
	}
	addr := func(typeID, country int) Address {
		i := slices.Index(genCountries, country)
		return Address{
			ID: o.ID*10 + int64(typeID), TypeID: typeID,
			Name:       genNames[rng.IntN(len(genNames))],
			Street:     "Hauptstraße " + strconv.Itoa(1+rng.IntN(120)),
			PostalCode: strconv.Itoa(10000 + rng.IntN(89999)),
			Town:       genTowns[i], CountryID: country,
		}
	}
	o.Addresses = []Address{addr(1, billing), addr(2, delivery)}

	gross := int64(500 + rng.IntN(50000))
	o.Amounts = []Amount{{Currency: "EUR", IsSystemCurrency: true, GrossCents: gross}}
	payCurrency := "EUR"
	if cur, ok := genCurrencyOf[delivery]; ok {
		o.Amounts = append(o.Amounts, Amount{Currency: cur, ExchangeRate: genRateOf[cur], GrossCents: gross * 11 / 10})
		payCurrency = cur
	}
	for i := range rng.IntN(3) { // unpaid orders have no payment
		mop, _ := strconv.Atoi(o.Properties[3])
		p := Payment{ID: o.ID*10 + int64(i) + 1, MopID: mop, Status: weighted(rng, genPayStatuses, genPayWeights), Currency: payCurrency, AmountCents: gross}
		o.Payments = append(o.Payments, p)
		o.Amounts[0].PaidCents += gross
	}
}

// appendCents writes cents as a JSON number with two decimals.
func appendCents(b []byte, c int64) []byte {
	if c < 0 {
		b = append(b, '-')
		c = -c
	}
	b = strconv.AppendInt(b, c/100, 10)
	b = append(b, '.')
	if c%100 < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, c%100, 10)
}

// appendArray renders `,"name":[...]` with each item written by item.
func appendArray[T any](b []byte, name string, items []T, item func(b []byte, i int, it *T) []byte) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, `":[`...)
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = item(b, i, &items[i])
	}
	return append(b, ']')
}

// appendRelations renders the requested relations of o as members of its
// entry (each preceded by a comma), then o.Raw; a Raw member takes the
// place of the relation of the same name.
func appendRelations(b []byte, o *Order, rels relationSet) []byte {
	if rels&withAddresses != 0 && !hasRaw(o, RelAddresses) {
		b = appendArray(b, RelAddresses, o.Addresses, func(b []byte, _ int, a *Address) []byte {
			b = append(b, `{"id":`...)
			b = strconv.AppendInt(b, a.ID, 10)
			b = append(b, `,"name1":"","name2":`...)
			b = appendJSONString(b, a.Name)
			b = append(b, `,"address1":`...)
			b = appendJSONString(b, a.Street)
			b = append(b, `,"postalCode":`...)
			b = appendJSONString(b, a.PostalCode)
			b = append(b, `,"town":`...)
			b = appendJSONString(b, a.Town)
			b = append(b, `,"countryId":`...)
			b = strconv.AppendInt(b, int64(a.CountryID), 10)
			b = append(b, `,"pivot":{"orderId":`...)
			b = strconv.AppendInt(b, o.ID, 10)
			b = append(b, `,"addressId":`...)
			b = strconv.AppendInt(b, a.ID, 10)
			b = append(b, `,"typeId":`...)
			b = strconv.AppendInt(b, int64(a.TypeID), 10)
			return append(b, "}}"...)
		})
	}
	if rels&withAmounts != 0 && !hasRaw(o, RelAmounts) {
		b = appendArray(b, RelAmounts, o.Amounts, func(b []byte, i int, a *Amount) []byte {
			b = append(b, `{"id":`...)
			b = strconv.AppendInt(b, o.ID*10+int64(i)+1, 10)
			b = append(b, `,"orderId":`...)
			b = strconv.AppendInt(b, o.ID, 10)
			b = append(b, `,"isSystemCurrency":`...)
			b = strconv.AppendBool(b, a.IsSystemCurrency)
			b = append(b, `,"isNet":false,"currency":`...)
			b = appendJSONString(b, a.Currency)
			b = append(b, `,"exchangeRate":`...)
			if a.ExchangeRate == "" || !isDecimalText(a.ExchangeRate) {
				b = append(b, '1')
			} else {
				b = append(b, a.ExchangeRate...)
			}
			b = append(b, `,"grossTotal":`...)
			b = appendCents(b, a.GrossCents)
			b = append(b, `,"invoiceTotal":`...)
			b = appendCents(b, a.GrossCents)
			b = append(b, `,"paidAmount":`...)
			b = appendCents(b, a.PaidCents)
			return append(b, '}')
		})
	}
	if rels&withPayments != 0 && !hasRaw(o, RelPayments) {
		b = appendArray(b, RelPayments, o.Payments, func(b []byte, _ int, p *Payment) []byte {
			b = append(b, `{"id":`...)
			b = strconv.AppendInt(b, p.ID, 10)
			b = append(b, `,"amount":`...)
			b = appendCents(b, p.AmountCents)
			b = append(b, `,"mopId":`...)
			b = strconv.AppendInt(b, int64(p.MopID), 10)
			b = append(b, `,"status":`...)
			b = strconv.AppendInt(b, int64(p.Status), 10)
			b = append(b, `,"currency":`...)
			b = appendJSONString(b, p.Currency)
			b = append(b, `,"isSystemCurrency":`...)
			b = strconv.AppendBool(b, p.Currency == "EUR")
			return append(b, '}')
		})
	}
	for _, k := range slices.Sorted(maps.Keys(o.Raw)) {
		b = append(b, ',')
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = append(b, o.Raw[k]...)
	}
	return b
}

func hasRaw(o *Order, key string) bool {
	_, ok := o.Raw[key]
	return ok
}

// isDecimalText reports whether s is a JSON number without exponent.
func isDecimalText(s string) bool {
	_, err := parseDecimal(s)
	return err == nil
}
