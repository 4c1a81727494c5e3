package events

import (
	"fmt"
	"strconv"
	"strings"
)

// Prefix is the subject prefix of one watcher (WATCHER_SUBJECT_PREFIX): one
// or more tokens, "orders" by default. Give each shop its own prefix
// ("shop1.orders") and a consumer selects a shop by its prefix. Its methods
// build the subjects and the wildcard filters a consumer subscribes with:
//
//	{prefix}.created.{orderId}
//	{prefix}.status_changed.{from}.{to}.{orderId}
//	{prefix}.lock_changed.{orderId}
//	{prefix}.discovered.{orderId}
//	{prefix}.updated.{orderId}
//
// Statuses are tokens (StatusToken): the decimal point becomes '_', an
// absent status is "none". The empty Prefix is DefaultPrefix.
type Prefix string

// DefaultPrefix is the watcher's default subject prefix.
const DefaultPrefix Prefix = "orders"

func (p Prefix) String() string {
	if p == "" {
		return string(DefaultPrefix)
	}
	return string(p)
}

// All is every event under the prefix: "orders.>".
func (p Prefix) All() string { return p.String() + ".>" }

// Type is every event of type t: "orders.created.*",
// "orders.status_changed.*.*.*".
func (p Prefix) Type(t Type) string {
	if t == StatusChanged {
		return p.String() + ".status_changed.*.*.*"
	}
	return p.String() + "." + t.token() + ".*"
}

// Into is every status change into status s: "orders.status_changed.*.8.*".
// It does not match orders seen for the first time in s (order.created,
// order.discovered; see Event.Entered).
func (p Prefix) Into(s Decimal) string {
	return p.String() + ".status_changed.*." + StatusToken(s) + ".*"
}

// OutOf is every status change out of status s:
// "orders.status_changed.5_1.*.*".
func (p Prefix) OutOf(s Decimal) string {
	return p.String() + ".status_changed." + StatusToken(s) + ".*.*"
}

// Transition is every status change from one status to another:
// "orders.status_changed.5.6.*".
func (p Prefix) Transition(from, to Decimal) string {
	return p.String() + ".status_changed." + StatusToken(from) + "." + StatusToken(to) + ".*"
}

// Order is every event of one order: two filters, "orders.*.1042" (created,
// lock_changed, discovered, updated) and "orders.status_changed.*.*.1042".
// They do not overlap, so both can be a consumer's FilterSubjects.
func (p Prefix) Order(id int64) []string {
	n := strconv.FormatInt(id, 10)
	return []string{p.String() + ".*." + n, p.String() + ".status_changed.*.*." + n}
}

// Of is the subject orderwatch publishes e to.
func (p Prefix) Of(e Event) string {
	id := strconv.FormatInt(e.Data.OrderID, 10)
	if e.Type == StatusChanged {
		var from Decimal
		if e.Data.Before != nil {
			from = e.Data.Before.StatusID
		}
		return p.String() + ".status_changed." + StatusToken(from) + "." + StatusToken(e.Data.After.StatusID) + "." + id
	}
	return p.String() + "." + e.Type.token() + "." + id
}

// Subject is what a subject says about its event.
type Subject struct {
	Type    Type
	OrderID int64
	// From and To are the statuses of an order.status_changed ("" for the
	// "none" token); empty for the other types.
	From, To Decimal
}

// Parse reads a subject under the prefix. A subject of a type it does not
// know (a newer orderwatch) is an error wrapping ErrUnknownType.
func (p Prefix) Parse(subject string) (Subject, error) {
	rest, ok := strings.CutPrefix(subject, p.String()+".")
	if !ok {
		return Subject{}, fmt.Errorf("subject %q is not under %q", subject, p.String())
	}
	toks := strings.Split(rest, ".")
	id, err := strconv.ParseInt(toks[len(toks)-1], 10, 64)
	if err != nil || id <= 0 || toks[len(toks)-1][0] == '+' {
		return Subject{}, fmt.Errorf("subject %q: last token is not an order id", subject)
	}
	typ := Type("order." + toks[0])
	switch {
	case typ == StatusChanged && len(toks) == 4:
		from, err := ParseStatusToken(toks[1])
		if err != nil {
			return Subject{}, fmt.Errorf("subject %q: %w", subject, err)
		}
		to, err := ParseStatusToken(toks[2])
		if err != nil {
			return Subject{}, fmt.Errorf("subject %q: %w", subject, err)
		}
		return Subject{Type: typ, OrderID: id, From: from, To: to}, nil
	case typ.Known() && typ != StatusChanged && len(toks) == 2:
		return Subject{Type: typ, OrderID: id}, nil
	case typ.Known():
		return Subject{}, fmt.Errorf("subject %q: %d tokens after the prefix, want %d", subject, len(toks), map[bool]int{true: 4, false: 2}[typ == StatusChanged])
	}
	return Subject{Type: typ, OrderID: id}, fmt.Errorf("subject %q: %w %q", subject, ErrUnknownType, typ)
}

// StatusToken renders a status as a subject token: the canonical decimal
// with '_' for the point ("5.1" -> "5_1", "7.10" -> "7_1"), "none" for an
// absent status (""). A value that is not a decimal becomes a token that
// matches no subject orderwatch publishes (its '.', wildcards and blanks
// replaced by '_'), never a wildcard.
func StatusToken(s Decimal) string {
	if s == "" {
		return "none"
	}
	c := s.Canonical()
	if c == "" {
		return strings.Map(func(r rune) rune {
			if r <= ' ' || r == '.' || r == '*' || r == '>' || r == 0x7f {
				return '_'
			}
			return r
		}, string(s))
	}
	return strings.ReplaceAll(c, ".", "_")
}

// ParseStatusToken reads a status token: "5_1" -> "5.1", "none" -> "".
func ParseStatusToken(tok string) (Decimal, error) {
	if tok == "none" {
		return "", nil
	}
	d := Decimal(strings.Replace(tok, "_", ".", 1))
	c := d.Canonical()
	if c == "" || c != string(d) || strings.ContainsAny(tok, "eE.") {
		return "", fmt.Errorf("status token %q is not a decimal with '_' for the point, nor \"none\"", tok)
	}
	return Decimal(c), nil
}
