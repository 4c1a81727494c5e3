package order

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Time is a timestamp of the service: RFC 3339 with a UTC offset, which it
// keeps (events render it as received). The PHP zero date
// (-0001-11-30T00:00:00+01:00, 0000-00-00 00:00:00), an empty string and null
// decode to the zero Time.
type Time struct {
	time.Time
}

// ParseTime parses a timestamp as the service writes it.
func ParseTime(s string) (Time, error) {
	s = strings.TrimSpace(s)
	if s == "" || isPHPZeroDate(s) {
		return Time{}, nil
	}
	for _, layout := range timeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			return Time{t}, nil
		}
	}
	return Time{}, fmt.Errorf("timestamp %q: not RFC 3339 with offset", s)
}

var timeLayouts = []string{time.RFC3339, time.RFC3339Nano, "2006-01-02 15:04:05Z07:00", "2006-01-02T15:04:05Z0700"}

func isPHPZeroDate(s string) bool {
	return strings.HasPrefix(s, "-0001-11-30") || strings.HasPrefix(s, "0000-00-00")
}

// String renders RFC 3339 with the original offset, "" for the zero Time.
func (t Time) String() string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339)
}

// UnmarshalJSON accepts a string timestamp, "" or null.
func (t *Time) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*t = Time{}
		return nil
	}
	if len(b) > 2 && b[0] == '"' && b[len(b)-1] == '"' {
		if t2, ok := parseTimeFast(b[1 : len(b)-1]); ok {
			*t = Time{t2}
			return nil
		}
	}
	s, err := jsonString(b)
	if err != nil {
		return fmt.Errorf("timestamp %s: not a string", truncate(b, 40))
	}
	v, err := ParseTime(s)
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// MarshalJSON writes RFC 3339 with the original offset, or null for the zero Time.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	return []byte(`"` + t.Format(time.RFC3339) + `"`), nil
}

// FlexString is a field the service sends as a string on some systems and as a
// number on others (locationId, ownerId). A number keeps its JSON text; null
// and absent are "".
type FlexString string

// UnmarshalJSON accepts a string, a number or null.
func (f *FlexString) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) == 0:
		return errors.New("empty value")
	case bytes.Equal(b, []byte("null")):
		*f = ""
	case b[0] == '"':
		s, err := jsonString(b)
		if err != nil {
			return err
		}
		*f = FlexString(s)
	case validNumber(string(b)):
		*f = FlexString(intern(b))
	default:
		return fmt.Errorf("want a string or a number, got %s", truncate(b, 40))
	}
	return nil
}

// MarshalJSON writes the value as a string, or null when empty.
func (f FlexString) MarshalJSON() ([]byte, error) {
	if f == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(f))
}

// FlexInt is an integer the service sends as a number or as a numeric string
// (the envelope's page on some systems, ids on some routes).
type FlexInt int64

// UnmarshalJSON accepts an integer, an integer string or null (0).
func (n *FlexInt) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*n = 0
		return nil
	}
	s := string(b)
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		// 3.0 is an integer written as a float; accept exact integers only.
		d, derr := ParseDecimal(s)
		if derr != nil || !d.IsInteger() {
			return fmt.Errorf("want an integer, got %s", truncate(b, 40))
		}
		v, err = strconv.ParseInt(d.Canonical(), 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer, got %s", truncate(b, 40))
		}
	}
	*n = FlexInt(v)
	return nil
}

// Order is one entry of an order search result, decoded losslessly. Raw holds
// the entry exactly as the service returned it; events carry it verbatim.
type Order struct {
	ID         int64
	ReferrerID Decimal
	PlentyID   int64
	TypeID     int64
	LockStatus string
	LocationID FlexString
	OwnerID    FlexString
	CreatedAt  Time
	UpdatedAt  Time
	StatusID   Decimal
	Raw        json.RawMessage
}

// wireOrder is the JSON shape of an entry; unknown fields are ignored.
type wireOrder struct {
	ID         *FlexInt   `json:"id"`
	ReferrerID Decimal    `json:"referrerId"`
	PlentyID   FlexInt    `json:"plentyId"`
	TypeID     FlexInt    `json:"typeId"`
	LockStatus *string    `json:"lockStatus"`
	LocationID FlexString `json:"locationId"`
	OwnerID    FlexString `json:"ownerId"`
	CreatedAt  Time       `json:"createdAt"`
	UpdatedAt  Time       `json:"updatedAt"`
	StatusID   Decimal    `json:"statusId"`
}

// DecodeOrder decodes one entry with encoding/json. It needs an id and an
// updatedAt; every other field may be absent. The raw bytes are kept (not
// copied: the caller owns raw).
func DecodeOrder(raw json.RawMessage) (Order, error) {
	var w wireOrder
	if err := json.Unmarshal(raw, &w); err != nil {
		return Order{}, err
	}
	return w.order(raw)
}

// order checks the decoded fields and builds the Order.
func (w *wireOrder) order(raw json.RawMessage) (Order, error) {
	if w.ID == nil || *w.ID <= 0 {
		return Order{}, errors.New("entry has no positive id")
	}
	if w.UpdatedAt.IsZero() {
		return Order{}, errors.New("entry has no updatedAt")
	}
	o := Order{
		ID:         int64(*w.ID),
		ReferrerID: w.ReferrerID,
		PlentyID:   int64(w.PlentyID),
		TypeID:     int64(w.TypeID),
		LocationID: w.LocationID,
		OwnerID:    w.OwnerID,
		CreatedAt:  w.CreatedAt,
		UpdatedAt:  w.UpdatedAt,
		StatusID:   w.StatusID,
		Raw:        raw,
	}
	if w.LockStatus != nil {
		o.LockStatus = *w.LockStatus
	}
	return o, nil
}

// Page is one page of an order search: the envelope as the service sent it and
// the decoded entries. Entries that could not be decoded are in Bad, with their
// raw text; they do not spoil the rest of the page.
type Page struct {
	Page           int64
	TotalsCount    int64
	IsLastPage     bool
	LastPageNumber int64
	FirstOnPage    int64
	LastOnPage     int64
	ItemsPerPage   int64
	Orders         []Order
	Bad            []EntryError
}

// EntryError is an entry that could not be decoded.
type EntryError struct {
	Index int             // position in the page's entries
	ID    string          // the id's raw JSON text when one could be read, else ""
	Raw   json.RawMessage // the entry as received
	Err   error
}

func (e EntryError) Error() string {
	id := e.ID
	if id == "" {
		id = "unknown id"
	}
	return fmt.Sprintf("entry %d (%s): %v: %s", e.Index, id, e.Err, truncate(e.Raw, 200))
}

// envelope is the JSON shape of a search page. Its entries are kept as text
// and decoded one by one, so that an entry that does not decode spoils only
// itself.
type envelope struct {
	Page           FlexInt           `json:"page"`
	TotalsCount    *FlexInt          `json:"totalsCount"`
	IsLastPage     bool              `json:"isLastPage"`
	LastPageNumber FlexInt           `json:"lastPageNumber"`
	FirstOnPage    FlexInt           `json:"firstOnPage"`
	LastOnPage     FlexInt           `json:"lastOnPage"`
	ItemsPerPage   FlexInt           `json:"itemsPerPage"`
	Entries        []json.RawMessage `json:"entries"`
}

// DecodePage decodes an order search response body with encoding/json, so it
// reads what encoding/json reads (escaped keys, keys in another case, the
// last of repeated keys). A body that is not a paginated envelope (not
// JSON, truncated, no totalsCount or entries, an envelope field of the wrong
// type) is an error; an undecodable entry is reported in Page.Bad.
func DecodePage(body []byte) (*Page, error) {
	var w envelope
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, &DecodeError{What: "order search page", Body: truncate(body, 200), Err: err}
	}
	if w.TotalsCount == nil || w.Entries == nil {
		return nil, &DecodeError{What: "order search page", Body: truncate(body, 200), Err: errors.New("not a paginated envelope (no totalsCount or entries)")}
	}
	p := &Page{
		Page: int64(w.Page), TotalsCount: int64(*w.TotalsCount), IsLastPage: w.IsLastPage, LastPageNumber: int64(w.LastPageNumber),
		FirstOnPage: int64(w.FirstOnPage), LastOnPage: int64(w.LastOnPage), ItemsPerPage: int64(w.ItemsPerPage),
		Orders: make([]Order, 0, len(w.Entries)),
	}
	for i, raw := range w.Entries {
		o, err := DecodeOrder(raw)
		if err != nil {
			p.Bad = append(p.Bad, EntryError{Index: i, ID: rawID(raw), Raw: raw, Err: err})
			continue
		}
		p.Orders = append(p.Orders, o)
	}
	return p, nil
}

// rawID digs the id out of an entry that did not decode, for the error report.
func rawID(raw json.RawMessage) string {
	var probe struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &probe) != nil || probe.ID == nil {
		return ""
	}
	return string(truncate(probe.ID, 40))
}

// DecodeError is a response body that could not be decoded: not JSON, cut
// short, an HTML error page, or the wrong shape. Retrying may help.
type DecodeError struct {
	What string
	Body []byte // the start of the body
	Err  error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("decode %s: %v (body starts %q)", e.What, e.Err, e.Body)
}

func (e *DecodeError) Unwrap() error { return e.Err }

func truncate(b []byte, n int) []byte {
	if len(b) <= n {
		return b
	}
	return b[:n]
}

// jsonString decodes a JSON string; the common case (printable ASCII, no
// escapes) without encoding/json and, for the short values that repeat,
// without allocating.
func jsonString(b []byte) (string, error) {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' && plainASCII(b[1:len(b)-1]) {
		return intern(b[1 : len(b)-1]), nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return "", err
	}
	return s, nil
}

func plainASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
