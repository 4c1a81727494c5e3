package diff

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// ContentType is the MIME type of an encoded event (CloudEvents structured mode).
const ContentType = "application/cloudevents+json"

// Encode appends the event as a CloudEvents 1.0 structured JSON message:
//
//	{"specversion":"1.0","id":..,"source":..,"type":..,"subject":"<orderId>",
//	 "time":"<after.updatedAt, RFC 3339 with its offset>",
//	 "datacontenttype":"application/json",
//	 "data":{"orderId":N,"before":<state|null>,"after":<state>,"order":<entry>
//	         [,"labels":{...}]}}
//
// A state renders as State.MarshalJSON does. The entry is written verbatim;
// invalid UTF-8 in it becomes U+FFFD, and an entry that is not JSON at all
// (never the case for one decoded by order.DecodeOrder) is written as a JSON
// string, so the result is valid JSON for every input. "labels" names the
// coded values of the entry's relations from the reference code lists (see
// appendLabels); it is left out when there is nothing to name. "time" is left
// out when after.updatedAt is zero. Encode does not validate source; it is
// escaped.
func Encode(dst []byte, e Event, source string) []byte {
	dst = append(dst, `{"specversion":"1.0","id":`...)
	dst = appendString(dst, e.ID)
	dst = append(dst, `,"source":`...)
	dst = appendString(dst, source)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, string(e.Type))
	dst = append(dst, `,"subject":"`...)
	dst = strconv.AppendInt(dst, e.OrderID, 10)
	dst = append(dst, '"')
	if !e.After.UpdatedAt.IsZero() {
		dst = append(dst, `,"time":`...)
		dst = appendTime(dst, e.After.UpdatedAt)
	}
	dst = append(dst, `,"datacontenttype":"application/json","data":{"orderId":`...)
	dst = strconv.AppendInt(dst, e.OrderID, 10)
	dst = append(dst, `,"before":`...)
	if e.Before == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendState(dst, e.Before)
	}
	dst = append(dst, `,"after":`...)
	dst = appendState(dst, &e.After)
	dst = append(dst, `,"order":`...)
	raw, valid := cleanRaw(e.Order)
	switch {
	case len(raw) == 0:
		dst = append(dst, "null"...)
	case valid:
		dst = append(dst, raw...)
		dst = appendLabels(dst, raw)
	default:
		dst = appendString(dst, string(raw))
	}
	return append(dst, "}}"...)
}

// MarshalJSON renders the state as events carry it:
//
//	{"statusId":5.1,"lockStatus":"unlocked","typeId":1,"referrerId":4.01,
//	 "plentyId":41523,"ownerId":"3","locationId":"1",
//	 "createdAt":"2026-11-20T11:40:17+01:00","updatedAt":"..."}
//
// Decimals are JSON numbers in canonical text (never through float64); an
// absent decimal, an empty lockStatus, ownerId or locationId and a zero time
// are null.
func (s State) MarshalJSON() ([]byte, error) {
	return appendState(make([]byte, 0, 256), &s), nil
}

func appendState(dst []byte, s *State) []byte {
	dst = append(dst, `{"statusId":`...)
	dst = appendDecimal(dst, s.StatusID)
	dst = append(dst, `,"lockStatus":`...)
	dst = appendNullableString(dst, s.LockStatus)
	dst = append(dst, `,"typeId":`...)
	dst = strconv.AppendInt(dst, s.TypeID, 10)
	dst = append(dst, `,"referrerId":`...)
	dst = appendDecimal(dst, s.ReferrerID)
	dst = append(dst, `,"plentyId":`...)
	dst = strconv.AppendInt(dst, s.PlentyID, 10)
	dst = append(dst, `,"ownerId":`...)
	dst = appendNullableString(dst, string(s.OwnerID))
	dst = append(dst, `,"locationId":`...)
	dst = appendNullableString(dst, string(s.LocationID))
	dst = append(dst, `,"createdAt":`...)
	dst = appendTime(dst, s.CreatedAt)
	dst = append(dst, `,"updatedAt":`...)
	dst = appendTime(dst, s.UpdatedAt)
	return append(dst, '}')
}

// appendDecimal writes the canonical text as a JSON number, or null.
func appendDecimal(dst []byte, d order.Decimal) []byte {
	if d.IsZero() {
		return append(dst, "null"...)
	}
	return append(dst, d.Canonical()...) // no allocation when the text is canonical already
}

func appendNullableString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, s)
}

// appendTime writes RFC 3339 with the time's own offset, or null. The
// formatted text is ASCII without quotes or backslashes, so it needs no escaping.
func appendTime(dst []byte, t order.Time) []byte {
	if t.IsZero() {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339)
	return append(dst, '"')
}

// cleanRaw returns the entry without surrounding white space and with each
// invalid UTF-8 byte replaced by U+FFFD (as encoding/json decodes it), and
// whether it is valid JSON, see Encode.
func cleanRaw(raw json.RawMessage) (clean []byte, valid bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false
	}
	if !utf8.Valid(raw) {
		raw = bytes.Map(func(r rune) rune { return r }, raw)
	}
	return raw, json.Valid(raw)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string. It escapes '"', '\\', control
// characters and U+2028/U+2029 (as encoding/json does) and replaces invalid
// UTF-8 with U+FFFD, so the output is always valid JSON and valid UTF-8.
// (strconv.AppendQuote is not JSON: it writes \x.. and \U........ escapes.)
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
