package plenty

import (
	"encoding/json"
	"errors"
	"fmt"
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

// str reads a string and returns its raw content (escapes not resolved).
func (s *scanner) str() (raw []byte, escaped bool, err error) {
	if !s.consume('"') {
		return nil, false, s.errorf("want a string")
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			raw = s.b[start:s.i]
			s.i++
			return raw, escaped, nil
		case c == '\\':
			escaped = true
			s.i++
			if s.i >= len(s.b) {
				return nil, false, s.errorf("string cut short")
			}
			switch s.b[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				if s.i+5 > len(s.b) {
					return nil, false, s.errorf("string cut short")
				}
				for _, h := range s.b[s.i+1 : s.i+5] {
					if !isHex(h) {
						return nil, false, s.errorf("bad \\u escape")
					}
				}
				s.i += 5
			default:
				return nil, false, s.errorf("bad escape")
			}
		case c < 0x20:
			return nil, false, s.errorf("control character in string")
		default:
			s.i++
		}
	}
	return nil, false, s.errorf("string cut short")
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
		return string(raw), nil
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
		s.i++
		if s.consume('}') {
			return nil
		}
		for {
			if _, _, err := s.str(); err != nil {
				return err
			}
			if !s.consume(':') {
				return s.errorf("want ':'")
			}
			if err := s.skip(depth + 1); err != nil {
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
	var w wireOrder
	var lock *string
	err := s.object(func(key []byte) error {
		v, err := s.value()
		if err != nil {
			return err
		}
		switch string(key) {
		case "id":
			var n FlexInt
			if err := n.UnmarshalJSON(v); err != nil {
				return fmt.Errorf("id: %w", err)
			}
			w.ID = &n
		case "statusId":
			return fieldErr("statusId", w.StatusID.UnmarshalJSON(v))
		case "referrerId":
			return fieldErr("referrerId", w.ReferrerID.UnmarshalJSON(v))
		case "plentyId":
			return fieldErr("plentyId", w.PlentyID.UnmarshalJSON(v))
		case "typeId":
			return fieldErr("typeId", w.TypeID.UnmarshalJSON(v))
		case "lockStatus":
			switch {
			case v[0] == 'n':
				lock = nil
			case v[0] == '"':
				ls := scanner{b: v}
				str, err := ls.stringValue()
				if err != nil {
					return err
				}
				lock = &str
			default:
				return fmt.Errorf("lockStatus: want a string, got %s", truncate(v, 40))
			}
		case "locationId":
			return fieldErr("locationId", w.LocationID.UnmarshalJSON(v))
		case "ownerId":
			return fieldErr("ownerId", w.OwnerID.UnmarshalJSON(v))
		case "createdAt":
			return fieldErr("createdAt", w.CreatedAt.UnmarshalJSON(v))
		case "updatedAt":
			return fieldErr("updatedAt", w.UpdatedAt.UnmarshalJSON(v))
		}
		return nil
	})
	if err == nil && s.peek() != 0 {
		err = s.errorf("data after the entry")
	}
	if err != nil {
		return Order{}, err
	}
	w.LockStatus = lock
	return w.order(raw)
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
				raw, err := s.value()
				if err != nil {
					return err
				}
				if o, err := decodeOrderFast(raw); err != nil {
					p.Bad = append(p.Bad, EntryError{Index: idx, ID: rawID(raw), Raw: raw, Err: err})
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
	if err == nil && s.peek() != 0 {
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
