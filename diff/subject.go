package diff

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// Subject returns the NATS subject of the event under prefix (see DESIGN.md
// "Events"):
//
//	{prefix}.created.{orderId}
//	{prefix}.status_changed.{from}.{to}.{orderId}
//	{prefix}.lock_changed.{orderId}
//	{prefix}.discovered.{orderId}
//	{prefix}.updated.{orderId}
//
// Statuses are decimal tokens (5.1 -> 5_1); an absent status is "none".
func (e Event) Subject(prefix string) string {
	id := strconv.FormatInt(e.OrderID, 10)
	switch e.Type {
	case StatusChanged:
		var from order.Decimal
		if e.Before != nil {
			from = e.Before.StatusID
		}
		return prefix + ".status_changed." + statusToken(from) + "." + statusToken(e.After.StatusID) + "." + id
	case Created, LockChanged, Discovered, Updated:
		return prefix + "." + strings.TrimPrefix(string(e.Type), "order.") + "." + id
	default:
		// Not produced by Decide; keep the subject well-formed anyway.
		return prefix + "." + sanitizeToken(strings.TrimPrefix(string(e.Type), "order.")) + "." + id
	}
}

func statusToken(d order.Decimal) string {
	if d.IsZero() {
		return "none"
	}
	return d.SubjectToken()
}

// sanitizeToken turns an arbitrary string into one subject token.
func sanitizeToken(s string) string {
	if s == "" {
		return "unknown"
	}
	return strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f || r == '.' || r == '*' || r == '>' || r == utf8.RuneError {
			return '_'
		}
		return r
	}, s)
}

// ValidPrefix checks a subject prefix: one or more non-empty tokens separated
// by '.', no whitespace or control characters, no wildcards ('*', '>'), valid
// UTF-8.
func ValidPrefix(prefix string) error {
	if prefix == "" {
		return errors.New("subject prefix is empty")
	}
	if !utf8.ValidString(prefix) {
		return fmt.Errorf("subject prefix %q is not valid UTF-8", prefix)
	}
	for i, tok := range strings.Split(prefix, ".") {
		if tok == "" {
			return fmt.Errorf("subject prefix %q: token %d is empty (leading, trailing or doubled '.')", prefix, i+1)
		}
		for _, r := range tok {
			switch {
			case r == '*' || r == '>':
				return fmt.Errorf("subject prefix %q: wildcard %q is not allowed", prefix, r)
			case unicode.IsSpace(r) || unicode.IsControl(r):
				return fmt.Errorf("subject prefix %q: whitespace or control character %q is not allowed", prefix, r)
			}
		}
	}
	return nil
}
