package plenty

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// A hand-written decoder for the two shapes the sweep reads hundreds of
// thousands of times a second: the search envelope and an order entry. It
// reads only the fields orderwatch uses, validates the JSON it walks (a body
// cut short or not JSON is an error, like encoding/json), and skips the rest
// without allocating. The tests compare it with the encoding/json reference
// decoder (decodeOrderReference) on the fixtures and under fuzzing.

var errSyntax = errors.New("invalid JSON")

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// atEnd reports whether only white space is left.
func (s *scanner) atEnd() bool {
	s.ws()
	return s.i >= len(s.b)
}

// peek returns the next non-space byte, 0 at the end.
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) consume(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// strPlain marks the bytes that may stand in a string as they are.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str reads a string and returns its raw content (escapes not resolved).
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	if !s.consume('"') {
		return nil, false, s.errorf("want a string")
	}
	start := s.i
	b := s.b
	for {
		i := s.i
		for i < len(b) && strPlain[b[i]] {
			i++
		}
		s.i = i
		if i >= len(b) {
			return nil, false, s.errorf("string cut short")
		}
		switch c := b[i]; {
		case c == '"':
			raw = b[start:i]
			s.i++
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			s.i++
			if s.i >= len(b) {
				return nil, false, s.errorf("string cut short")
			}
			switch b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+5 > len(b) {
					return nil, false, s.errorf("string cut short")
				}
				for _, h := range b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return nil, false, s.errorf("bad \\u escape")
					}
				}
				s.i += 5
			default:
				return nil, false, s.errorf("bad escape")
			}
		default:
			return nil, false, s.errorf("control character in string")
		}
	}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// stringValue reads a string and resolves escapes (rare: encoding/json does it).
func (s *scanner) stringValue() (string, error) {
	start := s.i
	raw, escaped, err := s.str()
	if err != nil {
		return "", err
	}
	if !escaped && utf8.Valid(raw) {
		return intern(raw), nil
	}
	var v string
	if err := json.Unmarshal(s.b[start:s.i], &v); err != nil {
		return "", err
	}
	return v, nil
}

// number reads a JSON number and returns its text.
func (s *scanner) number() ([]byte, error) {
	s.ws()
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			s.i++
			continue
		}
		break
	}
	text := s.b[start:s.i]
	if !validNumber(string(text)) || (len(text) > 1 && text[0] == '0' && text[1] != '.' && text[1] != 'e' && text[1] != 'E') ||
		(len(text) > 2 && text[0] == '-' && text[1] == '0' && text[2] >= '0' && text[2] <= '9') {
		return nil, s.errorf("bad number %q", text)
	}
	return text, nil
}

func (s *scanner) literal(word string) error {
	s.ws()
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.errorf("want %s", word)
	}
	s.i += len(word)
	return nil
}

// skip reads any value, validating it.
func (s *scanner) skip(depth int) error {
	if depth > 1000 {
		return s.errorf("nested too deep")
	}
	switch c := s.peek(); {
	case c == '{':
		return s.object(func([]byte) error { return s.skip(depth + 1) })
	case c == '[':
		s.i++
		if s.consume(']') {
			return nil
		}
		for {
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			if s.consume(',') {
				continue
			}
			if s.consume(']') {
				return nil
			}
			return s.errorf("want ',' or ']'")
		}
	case c == '"':
		_, _, err := s.str()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		_, err := s.number()
		return err
	case c == 0:
		return s.errorf("unexpected end")
	default:
		return s.errorf("unexpected %q", c)
	}
}

func (s *scanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", errSyntax, s.i, fmt.Sprintf(format, args...))
}

// object walks an object, calling field for each key; field must consume
// the value.
func (s *scanner) object(field func(key []byte) error) error {
	if !s.consume('{') {
		return s.errorf("want an object")
	}
	if s.consume('}') {
		return nil
	}
	for {
		key, escaped, err := s.str()
		if err != nil {
			return err
		}
		if escaped {
			key = nil // no field of ours has an escaped name; skip it
		}
		if !s.consume(':') {
			return s.errorf("want ':'")
		}
		if err := field(key); err != nil {
			return err
		}
		if s.consume(',') {
			continue
		}
		if s.consume('}') {
			return nil
		}
		return s.errorf("want ',' or '}'")
	}
}

// value returns the raw bytes of the next value, validated.
func (s *scanner) value() ([]byte, error) {
	s.ws()
	start := s.i
	if err := s.skip(0); err != nil {
		return nil, err
	}
	return s.b[start:s.i], nil
}

// decodeOrderFast decodes an entry like DecodeOrder: field errors are entry
// errors, JSON syntax errors too.
func decodeOrderFast(raw []byte) (Order, error) {
	s := scanner{b: raw}
	o, entryErr, err := s.order()
	if err == nil && !s.atEnd() {
		err = s.errorf("data after the entry")
	}
	if err != nil {
		return Order{}, err
	}
	return o, entryErr
}

// order reads one entry of a page in place. A syntax error (err) spoils the
// whole body; an entry error (a field of the wrong type, no id) spoils only
// this entry, which is read to its end.
func (s *scanner) order() (o Order, entryErr, err error) {
	s.ws()
	start := s.i
	if s.peek() != '{' {
		if err := s.skip(0); err != nil {
			return Order{}, nil, err
		}
		return Order{}, errors.New("entry is not an object"), nil
	}
	var w wireOrder
	var lock *string
	set := func(name string, e error) {
		if e != nil && entryErr == nil {
			entryErr = fmt.Errorf("%s: %w", name, e)
		}
	}
	err = s.object(func(key []byte) error {
		v, err := s.value()
		if err != nil {
			return err
		}
		switch string(key) {
		case "id":
			var n FlexInt
			if e := n.UnmarshalJSON(v); e != nil {
				set("id", e)
			} else {
				w.ID = &n
			}
		case "statusId":
			set("statusId", w.StatusID.UnmarshalJSON(v))
		case "referrerId":
			set("referrerId", w.ReferrerID.UnmarshalJSON(v))
		case "plentyId":
			set("plentyId", w.PlentyID.UnmarshalJSON(v))
		case "typeId":
			set("typeId", w.TypeID.UnmarshalJSON(v))
		case "lockStatus":
			switch v[0] {
			case 'n':
				lock = nil
			case '"':
				str, e := jsonString(v)
				set("lockStatus", e)
				lock = &str
			default:
				set("lockStatus", fmt.Errorf("want a string, got %s", truncate(v, 40)))
			}
		case "locationId":
			set("locationId", w.LocationID.UnmarshalJSON(v))
		case "ownerId":
			set("ownerId", w.OwnerID.UnmarshalJSON(v))
		case "createdAt":
			set("createdAt", w.CreatedAt.UnmarshalJSON(v))
		case "updatedAt":
			set("updatedAt", w.UpdatedAt.UnmarshalJSON(v))
		}
		return nil
	})
	if err != nil {
		return Order{}, nil, err
	}
	if entryErr != nil {
		return Order{}, entryErr, nil
	}
	w.LockStatus = lock
	o, entryErr = w.order(s.b[start:s.i])
	return o, entryErr, nil
}

func fieldErr(name string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// decodePageFast decodes an envelope like DecodePage.
func decodePageFast(body []byte) (*Page, error) {
	s := scanner{b: body}
	var p Page
	var total *FlexInt
	haveEntries := false
	intField := func(dst *int64, v []byte) error {
		var n FlexInt
		if err := n.UnmarshalJSON(v); err != nil {
			return err
		}
		*dst = int64(n)
		return nil
	}
	err := s.object(func(key []byte) error {
		switch string(key) {
		case "entries":
			if s.peek() == 'n' {
				return s.literal("null")
			}
			if !s.consume('[') {
				return s.errorf("entries: want an array")
			}
			haveEntries = true
			if s.consume(']') {
				return nil
			}
			for idx := 0; ; idx++ {
				s.ws()
				start := s.i
				o, entryErr, err := s.order()
				if err != nil {
					return err
				}
				if entryErr != nil {
					raw := s.b[start:s.i]
					p.Bad = append(p.Bad, EntryError{Index: idx, ID: rawID(raw), Raw: raw, Err: entryErr})
				} else {
					p.Orders = append(p.Orders, o)
				}
				if s.consume(',') {
					continue
				}
				if s.consume(']') {
					return nil
				}
				return s.errorf("entries: want ',' or ']'")
			}
		}
		v, err := s.value()
		if err != nil {
			return err
		}
		switch string(key) {
		case "page":
			return intField(&p.Page, v)
		case "totalsCount":
			var n FlexInt
			if err := n.UnmarshalJSON(v); err != nil {
				return err
			}
			total = &n
		case "isLastPage":
			switch string(v) {
			case "true":
				p.IsLastPage = true
			case "false", "null":
				p.IsLastPage = false
			default:
				return fmt.Errorf("isLastPage: want a boolean, got %s", truncate(v, 20))
			}
		case "lastPageNumber":
			return intField(&p.LastPageNumber, v)
		case "firstOnPage":
			return intField(&p.FirstOnPage, v)
		case "lastOnPage":
			return intField(&p.LastOnPage, v)
		case "itemsPerPage":
			return intField(&p.ItemsPerPage, v)
		}
		return nil
	})
	if err == nil && !s.atEnd() {
		err = s.errorf("data after the envelope")
	}
	if err != nil {
		return nil, &DecodeError{What: "order search page", Body: truncate(body, 200), Err: err}
	}
	if total == nil || !haveEntries {
		return nil, &DecodeError{What: "order search page", Body: truncate(body, 200), Err: errors.New("not a paginated envelope (no totalsCount or entries)")}
	}
	p.TotalsCount = int64(*total)
	if p.Orders == nil {
		p.Orders = []Order{}
	}
	return &p, nil
}

// zones caches the fixed zones of the offsets timestamps carry (one
// *time.Location per offset instead of one per parsed timestamp). Offsets
// are whole quarter hours in practice; others get a zone of their own.
var zones [4 * 48]atomic.Pointer[time.Location] // -24h..+24h in 15-minute steps

func fixedZone(offset int) *time.Location {
	if offset == 0 {
		return time.UTC
	}
	i := offset/900 + 4*24
	if offset%900 != 0 || i < 0 || i >= len(zones) {
		return time.FixedZone("", offset)
	}
	if z := zones[i].Load(); z != nil {
		return z
	}
	z := time.FixedZone("", offset)
	zones[i].Store(z)
	return z
}

// parseTimeFast reads the common form "2026-11-22T10:02:41+01:00" (or Z)
// without allocating; ok is false for anything else (ParseTime decides).
func parseTimeFast(b []byte) (t time.Time, ok bool) {
	if len(b) != 25 && len(b) != 20 {
		return time.Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for _, c := range b[i : i+n] {
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	if b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	year, mon, day, hour, min, sec := num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2)
	if year < 1 || mon < 1 || mon > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 || min < 0 || min > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	offset := 0
	switch {
	case len(b) == 20 && b[19] == 'Z':
	case len(b) == 25 && (b[19] == '+' || b[19] == '-') && b[22] == ':':
		oh, om := num(20, 2), num(23, 2)
		if oh < 0 || oh > 23 || om < 0 || om > 59 {
			return time.Time{}, false
		}
		offset = (oh*60 + om) * 60
		if b[19] == '-' {
			offset = -offset
		}
	default:
		return time.Time{}, false
	}
	t = time.Date(year, time.Month(mon), day, hour, min, sec, 0, fixedZone(offset))
	if t.Day() != day { // 31 February and the like
		return time.Time{}, false
	}
	return t, true
}

// interned are the short values that repeat in every page (lock states,
// small location and owner ids): decoding them allocates nothing.
var interned = func() map[string]string {
	m := map[string]string{}
	for _, s := range []string{"unlocked", "permanentlyLocked", "reversibleLocked", "locked"} {
		m[s] = s
	}
	for i := range 1000 {
		s := strconv.Itoa(i)
		m[s] = s
	}
	return m
}()

func intern(b []byte) string {
	if s, ok := interned[string(b)]; ok {
		return s
	}
	return string(b)
}
