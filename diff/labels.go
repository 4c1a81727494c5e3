package diff

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/orderwatch/orderwatch/refdata"
)

// Labels: the coded values an entry carries in the relations loaded with
// `with=` (WATCHER_WITH), named from the service's reference code lists
// (package refdata). Encode adds them to data as
//
//	"labels":{
//	  "countries":{"1":{"iso":"DE"},"37":{"iso":"IC","name":"Canary Islands","territory":true}},
//	  "currencies":{"EUR":{"code":"EUR","name":"Euro"}},
//	  "paymentStatuses":{"3":{"name":"Captured"}}}
//
// keyed by the value as the entry carries it (an id as its decimal digits, a
// currency as sent), so a subscriber looks up what it reads in data.order.
// Where the codes are read:
//
//	countries        addresses[].countryId
//	currencies       amounts[].currency, payments[].currency, orderItems[].amounts[].currency
//	paymentStatuses  payments[].status
//
// A relation may also be an object: one item (it has the field itself) or
// items keyed by id (PHP arrays with gaps). Only codes the lists know are
// named: an unknown id, a value of another type, a relation of another shape
// or an absent relation is left as sent, without a label. A kind without
// labels is left out, and "labels" too when nothing is named, so an entry
// without relations encodes exactly as before. The order fields statusId,
// referrerId and typeId have no reference list in the service's documents
// and are not labelled.

// The label JSON of every code, built once from refdata.
var (
	countryLabels       = buildIDLabels(refdata.Countries(), func(c refdata.Country) (int, []byte) { return c.ID, countryLabel(c) })
	paymentStatusLabels = buildIDLabels(refdata.PaymentStatuses(), func(p refdata.PaymentStatusInfo) (int, []byte) {
		return p.ID, append(appendString(append([]byte(nil), `{"name":`...), p.Name), '}')
	})
	currencyLabels = func() map[string][]byte {
		m := make(map[string][]byte)
		for _, c := range refdata.CurrencyInfos() {
			b := appendString(append([]byte(nil), `{"code":`...), c.Code)
			b = appendString(append(b, `,"name":`...), c.Name)
			m[c.Code] = append(b, '}')
		}
		return m
	}()
)

func countryLabel(c refdata.Country) []byte {
	b := []byte{'{'}
	if c.ISO != "" {
		b = appendString(append(b, `"iso":`...), c.ISO)
	}
	if c.Name != "" {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = appendString(append(b, `"name":`...), c.Name)
	}
	if c.Territory {
		b = append(b, `,"territory":true`...)
	}
	return append(b, '}')
}

// buildIDLabels indexes the label JSON of each item by its id (ids are
// small and dense); a nil entry is an unknown id.
func buildIDLabels[T any](items []T, label func(T) (int, []byte)) [][]byte {
	var out [][]byte
	for _, it := range items {
		id, b := label(it)
		if id >= len(out) {
			out = append(out, make([][]byte, id+1-len(out))...)
		}
		out[id] = b
	}
	return out
}

// labelSet collects the known codes of one entry; the arrays hold the
// usual few codes without allocating.
type labelSet struct {
	countries  []int
	statuses   []int
	currencies [][]byte // as sent, unescaped

	countryBuf, statusBuf [8]int
	currencyBuf           [8][]byte
}

// relationKeys are the keys that can carry coded values, without their
// closing `s"`, which all of them end with.
var relationKeys = [...]string{`"addresse`, `"amount`, `"payment`, `"orderItem`}

// appendLabels writes `,"labels":{...}` for the entry raw (valid JSON), or
// nothing when no code in it is known.
func appendLabels(dst, raw []byte) []byte {
	if raw[0] != '{' || !hasRelationKey(raw) {
		return dst
	}
	var set labelSet
	set.countries, set.statuses, set.currencies = set.countryBuf[:0], set.statusBuf[:0], set.currencyBuf[:0]
	eachMember(raw, func(key, val []byte) {
		switch string(key) {
		case "addresses":
			eachItem(val, "countryId", func(item []byte) {
				eachMember(item, func(k, v []byte) {
					if string(k) == "countryId" {
						set.addID(&set.countries, countryLabels, v)
					}
				})
			})
		case "amounts":
			eachItem(val, "currency", set.addCurrencyOf)
		case "payments":
			eachItem(val, "status", func(item []byte) {
				eachMember(item, func(k, v []byte) {
					switch string(k) {
					case "status":
						set.addID(&set.statuses, paymentStatusLabels, v)
					case "currency":
						set.addCurrency(v)
					}
				})
			})
		case "orderItems":
			eachItem(val, "amounts", func(item []byte) {
				eachMember(item, func(k, v []byte) {
					if string(k) == "amounts" {
						eachItem(v, "currency", set.addCurrencyOf)
					}
				})
			})
		}
	})
	if len(set.countries)+len(set.statuses)+len(set.currencies) == 0 {
		return dst
	}
	dst = append(dst, `,"labels":{`...)
	n := 0
	sep := func() {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
	}
	if len(set.countries) > 0 {
		sep()
		dst = appendIDLabels(append(dst, `"countries":`...), set.countries, countryLabels)
	}
	if len(set.currencies) > 0 {
		sep()
		slices.SortFunc(set.currencies, bytes.Compare)
		dst = append(dst, `"currencies":{`...)
		for i, c := range set.currencies {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, string(c))
			dst = append(dst, ':')
			dst = append(dst, currencyLabels[upperCode(c)]...)
		}
		dst = append(dst, '}')
	}
	if len(set.statuses) > 0 {
		sep()
		dst = appendIDLabels(append(dst, `"paymentStatuses":`...), set.statuses, paymentStatusLabels)
	}
	return append(dst, '}')
}

// hasRelationKey reports whether raw holds one of the relation keys (as a
// key or in a string). It looks only at the few places where `s"` occurs,
// so an entry without relations (the common case: no WATCHER_WITH) costs
// one quick search and is not walked.
func hasRelationKey(raw []byte) bool {
	for i := 0; ; {
		j := bytes.Index(raw[i:], []byte(`s"`))
		if j < 0 {
			return false
		}
		i += j + 1 // at the quote
		for _, k := range relationKeys {
			if i-1 >= len(k) && string(raw[i-1-len(k):i-1]) == k {
				return true
			}
		}
	}
}

func appendIDLabels(dst []byte, ids []int, labels [][]byte) []byte {
	slices.Sort(ids)
	dst = append(dst, '{')
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = strconv.AppendInt(dst, int64(id), 10)
		dst = append(dst, '"', ':')
		dst = append(dst, labels[id]...)
	}
	return append(dst, '}')
}

// addID adds the id v (a JSON integer, or a string of one) to *ids when
// labels knows it.
func (s *labelSet) addID(ids *[]int, labels [][]byte, v []byte) {
	id, ok := parseID(v)
	if !ok || id >= len(labels) || labels[id] == nil || slices.Contains(*ids, id) {
		return
	}
	*ids = append(*ids, id)
}

// addCurrencyOf adds the currency of an item.
func (s *labelSet) addCurrencyOf(item []byte) {
	eachMember(item, func(k, v []byte) {
		if string(k) == "currency" {
			s.addCurrency(v)
		}
	})
}

// addCurrency adds the currency v (a JSON string) when the list knows it.
func (s *labelSet) addCurrency(v []byte) {
	if len(v) < 2 || v[0] != '"' {
		return
	}
	code := v[1 : len(v)-1]
	if bytes.IndexByte(code, '\\') >= 0 {
		var str string
		if json.Unmarshal(v, &str) != nil {
			return
		}
		code = []byte(str)
	}
	if _, ok := currencyLabels[upperCode(code)]; !ok {
		return
	}
	for _, c := range s.currencies {
		if bytes.Equal(c, code) {
			return
		}
	}
	s.currencies = append(s.currencies, code)
}

// upperCode returns a three-letter code in upper case ("" for anything
// else); the map lookup with it does not allocate.
func upperCode(code []byte) string {
	if len(code) != 3 {
		return ""
	}
	var up [3]byte
	for i, c := range code {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		up[i] = c
	}
	return string(up[:])
}

// parseID reads a small non-negative integer: 12, 12.0 or "12". Anything
// else (negative, fractional, exponent, other types, more than 9 digits) is
// not an id of the lists.
func parseID(v []byte) (int, bool) {
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if intPart, frac, ok := bytes.Cut(v, []byte{'.'}); ok {
		if len(frac) == 0 || len(bytes.Trim(frac, "0")) != 0 {
			return 0, false
		}
		v = intPart
	}
	if len(v) == 0 || len(v) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// eachItem calls fn with each object of a relation: the elements of an
// array; for an object, the object itself when it has the field, otherwise
// its member values (items keyed by id). Other values have no items.
func eachItem(rel []byte, field string, fn func(item []byte)) {
	if len(rel) == 0 {
		return
	}
	switch rel[0] {
	case '[':
		eachElement(rel, func(v []byte) {
			if v[0] == '{' {
				fn(v)
			}
		})
	case '{':
		direct := false
		eachMember(rel, func(k, _ []byte) { direct = direct || string(k) == field })
		if direct {
			fn(rel)
			return
		}
		eachMember(rel, func(_, v []byte) {
			if v[0] == '{' {
				fn(v)
			}
		})
	}
}

// The walkers below read JSON that json.Valid accepted. They still stop at
// anything unexpected instead of indexing past the end, so a bug shows as a
// missing label, never as a panic.

// eachMember calls fn with the raw key (without quotes, escapes kept) and
// the raw value of each member of the object b.
func eachMember(b []byte, fn func(key, val []byte)) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return
	}
	i++
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return
		}
		ke := stringEnd(b, i)
		if ke < 0 {
			return
		}
		key := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return
		}
		i = skipWS(b, i+1)
		ve := valueEnd(b, i)
		if ve < 0 {
			return
		}
		fn(key, b[i:ve])
		i = skipWS(b, ve)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i++
	}
}

// eachElement calls fn with each element of the array b.
func eachElement(b []byte, fn func(val []byte)) {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '[' {
		return
	}
	i++
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] == ']' {
			return
		}
		ve := valueEnd(b, i)
		if ve < 0 {
			return
		}
		fn(b[i:ve])
		i = skipWS(b, ve)
		if i >= len(b) || b[i] != ',' {
			return
		}
		i++
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the string starting at b[i] == '"', or
// -1 when it does not end.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd returns the index after the value starting at b[i], or -1.
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				e := stringEnd(b, j)
				if e < 0 {
					return -1
				}
				j = e - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	default: // number, true, false, null
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}
