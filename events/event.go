package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Type is an event type, the CloudEvents "type" attribute.
type Type string

// The event types (schemas/events/<type>.json).
const (
	// Created: first sight, after the first sync, of an order created
	// after the baseline point. Data.Before is nil.
	Created Type = "order.created"
	// StatusChanged: the order's statusId changed (Before.StatusID ->
	// After.StatusID).
	StatusChanged Type = "order.status_changed"
	// LockChanged: the order's lockStatus changed.
	LockChanged Type = "order.lock_changed"
	// Discovered: first sight, after the first sync, of an order created
	// before the baseline point (or at an unknown time): its history is
	// unknown. Data.Before is nil. Also the type of the first sync's
	// events when the watcher runs with WATCHER_BASELINE_EVENTS=true.
	Discovered Type = "order.discovered"
	// Updated (opt-in, WATCHER_EMIT_UPDATED): the order's updatedAt
	// advanced.
	Updated Type = "order.updated"
)

// Types lists every event type.
var Types = []Type{Created, StatusChanged, LockChanged, Discovered, Updated}

// Known reports whether t is one of Types. A newer orderwatch may add
// types; a consumer should acknowledge and skip an event it does not know.
func (t Type) Known() bool {
	switch t {
	case Created, StatusChanged, LockChanged, Discovered, Updated:
		return true
	}
	return false
}

// token is the subject token of the type ("status_changed").
func (t Type) token() string { return strings.TrimPrefix(string(t), "order.") }

// Event is one orderwatch event: a CloudEvents 1.0 message in structured
// JSON mode. It encodes to JSON exactly as orderwatch does (field names,
// nulls, numbers as sent), so a decoded event re-encodes to a value that
// passes the schema again.
type Event struct {
	SpecVersion     string    `json:"specversion"` // "1.0"
	ID              string    `json:"id"`          // 32 lower-case hex digits, deterministic; the Nats-Msg-Id header is MsgID(shop, ID)
	Source          string    `json:"source"`      // the shop's base URL or WATCHER_SOURCE
	Type            Type      `json:"type"`
	Subject         string    `json:"subject"`         // the order id in decimal (CloudEvents subject, not the NATS subject)
	Time            time.Time `json:"time"`            // the order's updatedAt, with the shop's offset
	DataContentType string    `json:"datacontenttype"` // "application/json"
	Data            Data      `json:"data"`
}

// Data is the event's data.
type Data struct {
	OrderID int64 `json:"orderId"`
	// Before is the tracked state before the change; nil exactly on first
	// sight (Created, Discovered).
	Before *State `json:"before"`
	// After is the tracked state the order has now.
	After State `json:"after"`
	// Order is the order entry exactly as the shop's REST search returned
	// it (its fields depend on the shop and on WATCHER_WITH).
	Order json.RawMessage `json:"order"`
	// Labels names the coded values of the entry's relations (countries,
	// currencies, payment statuses); nil when there is nothing to name.
	Labels *Labels `json:"labels,omitempty"`
}

// State is the tracked state of an order. The schema's nulls are zero
// values here: "" for a string or Decimal, the zero time.
type State struct {
	StatusID   Decimal   // order status (5, 5.1, 11.1)
	LockStatus string    // unlocked, permanentlyLocked, reversibleLocked, ...; "" when null
	TypeID     int64     // order type (0 when the shop sent none)
	ReferrerID Decimal   // referrer (1, 4.01); "" when null
	PlentyID   int64     // client (store) id (0 when the shop sent none)
	OwnerID    string    // owner (user) id; "" when null
	LocationID string    // accounting location id; "" when null
	CreatedAt  time.Time // zero when null (unknown)
	UpdatedAt  time.Time // the order's last change
}

// wireState is State as JSON: every field present, absent values null.
type wireState struct {
	StatusID   Decimal    `json:"statusId"`
	LockStatus *string    `json:"lockStatus"`
	TypeID     int64      `json:"typeId"`
	ReferrerID Decimal    `json:"referrerId"`
	PlentyID   int64      `json:"plentyId"`
	OwnerID    *string    `json:"ownerId"`
	LocationID *string    `json:"locationId"`
	CreatedAt  *time.Time `json:"createdAt"`
	UpdatedAt  time.Time  `json:"updatedAt"`
}

// MarshalJSON writes every field, null for an empty string or decimal and
// a zero CreatedAt.
func (s State) MarshalJSON() ([]byte, error) {
	w := wireState{StatusID: s.StatusID, TypeID: s.TypeID, ReferrerID: s.ReferrerID, PlentyID: s.PlentyID, UpdatedAt: s.UpdatedAt,
		LockStatus: nullable(s.LockStatus), OwnerID: nullable(s.OwnerID), LocationID: nullable(s.LocationID)}
	if !s.CreatedAt.IsZero() {
		w.CreatedAt = &s.CreatedAt
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a state; null reads as the zero value.
func (s *State) UnmarshalJSON(b []byte) error {
	var w wireState
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = State{StatusID: w.StatusID, TypeID: w.TypeID, ReferrerID: w.ReferrerID, PlentyID: w.PlentyID, UpdatedAt: w.UpdatedAt,
		LockStatus: deref(w.LockStatus), OwnerID: deref(w.OwnerID), LocationID: deref(w.LocationID)}
	if w.CreatedAt != nil {
		s.CreatedAt = *w.CreatedAt
	}
	return nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Labels names the coded values in the relations of Data.Order, from the
// shop's reference code lists. Each map is keyed by the value as the entry
// carries it (an id in decimal digits, a currency code).
type Labels struct {
	Countries       map[string]CountryLabel       `json:"countries,omitempty"`       // addresses[].countryId
	Currencies      map[string]CurrencyLabel      `json:"currencies,omitempty"`      // amounts[].currency, payments[].currency, ...
	PaymentStatuses map[string]PaymentStatusLabel `json:"paymentStatuses,omitempty"` // payments[].status
}

// CountryLabel is an entry of the country ID list.
type CountryLabel struct {
	ISO       string `json:"iso,omitempty"`       // ISO 3166-1 code ("DE"); empty for id 0
	Name      string `json:"name,omitempty"`      // set for id 0, Kosovo and the territories
	Territory bool   `json:"territory,omitempty"` // a territory, not a country
}

// CurrencyLabel is a supported currency.
type CurrencyLabel struct {
	Code string `json:"code"` // ISO 4217
	Name string `json:"name"`
}

// PaymentStatusLabel is an entry of the payment status ID list.
type PaymentStatusLabel struct {
	Name string `json:"name"`
}

// Decimal is a decimal number as the events carry it (statusId,
// referrerId): the JSON number's text, exact ("5.1", "4.01"; never through
// float64). "" is null (absent). Compare with Equal: 5.10 and 5.1 are
// equal but differ as strings.
type Decimal string

// MarshalJSON writes the number as it was read, or null.
func (d Decimal) MarshalJSON() ([]byte, error) {
	if d == "" {
		return []byte("null"), nil
	}
	if !isNumber(string(d)) {
		return nil, fmt.Errorf("decimal %q is not a JSON number", string(d))
	}
	return []byte(d), nil
}

// UnmarshalJSON reads a JSON number or null. A string is refused: the
// events never carry a decimal as a string.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = ""
		return nil
	}
	if !isNumber(string(b)) {
		return fmt.Errorf("decimal: %s is not a JSON number", b)
	}
	*d = Decimal(b)
	return nil
}

// isNumber reports whether s is a JSON number.
func isNumber(s string) bool {
	return s != "" && (s[0] == '-' || s[0] >= '0' && s[0] <= '9') && json.Valid([]byte(s))
}

// decimalText is a decimal literal: JSON number syntax, leading zeros
// allowed.
var decimalText = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

// Canonical is the shortest exact form ("05.10" -> "5.1", "1e1" -> "10",
// "-0" -> "0"); "" for null or a value that is not a decimal.
func (d Decimal) Canonical() string {
	s := string(d)
	if !decimalText.MatchString(s) {
		return ""
	}
	if strings.ContainsAny(s, "eE") {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return ""
		}
		// A decimal with an exponent has a power of ten as denominator
		// (times 2^a 5^b): 64 fraction digits are more than any status holds.
		s = r.FloatString(64)
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(s, ".")
	intPart = strings.TrimLeft(intPart, "0")
	frac = strings.TrimRight(frac, "0")
	if intPart == "" {
		intPart = "0"
	}
	if frac != "" {
		intPart += "." + frac
	}
	if neg && intPart != "0" {
		intPart = "-" + intPart
	}
	return intPart
}

// Equal reports whether two decimals have the same value (both null counts
// as equal).
func (d Decimal) Equal(o Decimal) bool { return d.Canonical() == o.Canonical() }

// Token is the decimal as a subject token (StatusToken).
func (d Decimal) Token() string { return StatusToken(d) }

// Errors of Unmarshal and Decode; match with errors.Is.
var (
	// ErrNotEvent: the message is not an orderwatch event (not JSON, not
	// CloudEvents 1.0 structured mode, a required attribute missing or
	// inconsistent).
	ErrNotEvent = errors.New("not an orderwatch event")
	// ErrUnknownType: a well-formed event of a type this package does not
	// know (a newer orderwatch). The returned Event is filled in; a
	// consumer acknowledges and skips it.
	ErrUnknownType = errors.New("unknown event type")
)

var idPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// Unmarshal decodes one event in CloudEvents structured JSON mode and
// checks what a consumer relies on: specversion 1.0, an id in the event id
// form, a source, datacontenttype application/json, a subject equal to
// data.orderId, the after state's updatedAt. It does not check everything
// the JSON Schema does (schemas.Validate does). Unknown members are
// ignored, so that events of a newer minor version still decode.
func Unmarshal(b []byte) (Event, error) {
	var e Event
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("%w: %v", ErrNotEvent, err)
	}
	if d.More() {
		return Event{}, fmt.Errorf("%w: data after the event", ErrNotEvent)
	}
	if err := e.check(); err != nil {
		return e, err
	}
	return e, nil
}

func (e *Event) check() error {
	switch {
	case e.SpecVersion != "1.0":
		return fmt.Errorf("%w: specversion %q, want 1.0", ErrNotEvent, e.SpecVersion)
	case !idPattern.MatchString(e.ID):
		return fmt.Errorf("%w: id %q is not 32 lower-case hex digits", ErrNotEvent, e.ID)
	case e.Source == "":
		return fmt.Errorf("%w: no source", ErrNotEvent)
	case e.DataContentType != "application/json":
		return fmt.Errorf("%w: datacontenttype %q, want application/json", ErrNotEvent, e.DataContentType)
	case e.Data.OrderID <= 0:
		return fmt.Errorf("%w: no data.orderId", ErrNotEvent)
	case e.Subject != strconv.FormatInt(e.Data.OrderID, 10):
		return fmt.Errorf("%w: subject %q differs from data.orderId %d", ErrNotEvent, e.Subject, e.Data.OrderID)
	case e.Data.After.UpdatedAt.IsZero():
		return fmt.Errorf("%w: no data.after.updatedAt", ErrNotEvent)
	case !e.Type.Known():
		return fmt.Errorf("%w %q", ErrUnknownType, e.Type)
	case (e.Type == Created || e.Type == Discovered) != (e.Data.Before == nil):
		return fmt.Errorf("%w: %s with before %s", ErrNotEvent, e.Type, map[bool]string{true: "null", false: "set"}[e.Data.Before == nil])
	}
	return nil
}

// OrderID is the event's order id.
func (e Event) OrderID() int64 { return e.Data.OrderID }

// Status is the order's status after the event.
func (e Event) Status() Decimal { return e.Data.After.StatusID }

// FirstSight reports an event of an order seen for the first time
// (Created, Discovered): Data.Before is nil.
func (e Event) FirstSight() bool { return e.Data.Before == nil }

// Entered reports whether this event puts the order into status s: an
// order.status_changed into s, or first sight (Created, Discovered) in s.
// A lock_changed or updated event of the same change carries the same
// after state but does not count, so one change is entered once. Orders
// the silent first sync records never enter a status this way
// (docs/consuming.md, "The first sync is silent").
func (e Event) Entered(s Decimal) bool {
	switch e.Type {
	case StatusChanged:
		return e.Data.Before != nil && !e.Data.Before.StatusID.Equal(s) && e.Data.After.StatusID.Equal(s)
	case Created, Discovered:
		return e.Data.After.StatusID.Equal(s)
	}
	return false
}

// Left reports whether this event is an order.status_changed out of status s.
func (e Event) Left(s Decimal) bool {
	return e.Type == StatusChanged && e.Data.Before != nil && e.Data.Before.StatusID.Equal(s) && !e.Data.After.StatusID.Equal(s)
}

// String is one line about the event: "order.status_changed order 2302:
// 5 -> 5.1".
func (e Event) String() string {
	head := fmt.Sprintf("%s order %d: ", e.Type, e.Data.OrderID)
	switch {
	case e.Type == StatusChanged && e.Data.Before != nil:
		return head + string(orNone(e.Data.Before.StatusID)) + " -> " + string(orNone(e.Data.After.StatusID))
	case e.Type == LockChanged && e.Data.Before != nil:
		return head + "lock " + string(orNone(Decimal(e.Data.Before.LockStatus))) + " -> " + string(orNone(Decimal(e.Data.After.LockStatus)))
	case e.Type == Updated:
		return head + "updated at " + e.Data.After.UpdatedAt.Format(time.RFC3339)
	}
	return head + "in status " + string(orNone(e.Data.After.StatusID))
}

func orNone(d Decimal) Decimal {
	if d == "" {
		return "none"
	}
	return d
}
