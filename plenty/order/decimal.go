package order

import (
	"bytes"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Decimal is an exact decimal number as the service sends it for statusId and
// referrerId: a JSON number (5, 5.1) or a decimal string ("5.7"). It keeps the
// text it was given, so no float rounding ever touches an id or a status, and
// compares by numeric value (5.10 equals 5.1).
//
// The zero Decimal is "absent" (JSON null or a missing field).
type Decimal struct {
	text string // as received, without quotes; "" when absent
}

// ErrInvalidDecimal reports a value that is neither a JSON number nor a decimal string.
var ErrInvalidDecimal = errors.New("not a decimal number")

// ParseDecimal parses a decimal in JSON number syntax (an exponent is allowed).
func ParseDecimal(s string) (Decimal, error) {
	if !validNumber(s) || absurdExponent(s) {
		return Decimal{}, fmt.Errorf("%w: %q", ErrInvalidDecimal, s)
	}
	return Decimal{text: s}, nil
}

// MustDecimal is ParseDecimal for constants in code and tests; it panics on bad input.
func MustDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}

// DecimalFromInt returns the decimal of an integer.
func DecimalFromInt(n int64) Decimal { return Decimal{text: fmt.Sprint(n)} }

// IsZero reports whether the decimal is absent.
func (d Decimal) IsZero() bool { return d.text == "" }

// String returns the text as received ("" when absent).
func (d Decimal) String() string { return d.text }

// Canonical returns the shortest exact form: no leading zeros, no trailing
// fractional zeros, no exponent ("05.10" -> "5.1", "1e1" -> "10", "-0" -> "0").
func (d Decimal) Canonical() string {
	if d.text == "" || isCanonical(d.text) {
		return d.text // the common case (5, 5.1, 4.01): no allocation
	}
	return d.parsedCanonical()
}

func (d Decimal) parsedCanonical() string {
	if d.text == "" {
		return ""
	}
	neg, intPart, frac := d.parts()
	s := intPart
	if frac != "" {
		s += "." + frac
	}
	if neg && s != "0" {
		s = "-" + s
	}
	return s
}

// Cmp compares by numeric value: -1, 0 or +1. An absent decimal sorts first.
func (d Decimal) Cmp(o Decimal) int {
	switch {
	case d.text == "" && o.text == "":
		return 0
	case d.text == "":
		return -1
	case o.text == "":
		return 1
	}
	if d.text == o.text {
		return 0
	}
	an, ai, af := d.parts()
	bn, bi, bf := o.parts()
	if ai == "0" && af == "" {
		an = false
	}
	if bi == "0" && bf == "" {
		bn = false
	}
	if an != bn {
		if an {
			return -1
		}
		return 1
	}
	c := cmpMagnitude(ai, af, bi, bf)
	if an {
		return -c
	}
	return c
}

// Equal reports numeric equality.
func (d Decimal) Equal(o Decimal) bool { return d.Cmp(o) == 0 }

// IsInteger reports whether the value has no fractional part.
func (d Decimal) IsInteger() bool {
	_, _, frac := d.parts()
	return d.text != "" && frac == ""
}

// SubjectToken renders the value for a NATS subject token: the canonical form
// with '.' replaced by '_' and '-' kept ("5.1" -> "5_1").
func (d Decimal) SubjectToken() string {
	return strings.ReplaceAll(d.Canonical(), ".", "_")
}

// UnmarshalJSON accepts a JSON number, a string holding a decimal number, or null.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	if len(b) == 0 {
		return ErrInvalidDecimal
	}
	if b[0] == 'n' && bytes.Equal(b, []byte("null")) {
		*d = Decimal{}
		return nil
	}
	s := string(b)
	if b[0] == '"' {
		if len(b) < 2 || b[len(b)-1] != '"' {
			return fmt.Errorf("%w: %s", ErrInvalidDecimal, b)
		}
		s = strings.TrimSpace(s[1 : len(s)-1])
		if s == "" {
			*d = Decimal{}
			return nil
		}
	}
	v, err := ParseDecimal(s)
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// MarshalJSON writes the value as a JSON number in its received text, or
// null. A decimal string that is no JSON number as it stands ("05", "00.5")
// is written in its canonical form.
func (d Decimal) MarshalJSON() ([]byte, error) {
	if d.text == "" {
		return []byte("null"), nil
	}
	if leadingZero(d.text) {
		return []byte(d.Canonical()), nil
	}
	return []byte(d.text), nil
}

// leadingZero reports an integer part with a leading zero ("05", "-00.5"):
// valid for ParseDecimal, not in JSON.
func leadingZero(s string) bool {
	s = strings.TrimPrefix(s, "-")
	return len(s) > 1 && s[0] == '0' && s[1] >= '0' && s[1] <= '9'
}

// parts splits the value into sign, integer digits (no leading zeros, at least
// "0") and fractional digits (no trailing zeros).
func (d Decimal) parts() (neg bool, intPart, frac string) {
	s := d.text
	if s == "" {
		return false, "0", ""
	}
	if strings.ContainsAny(s, "eE") {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return false, "0", ""
		}
		// An exponent form is rare; render it exactly through big.Rat. The
		// denominator of a finite decimal is a power of 10 times 2^a5^b; 64
		// digits are more than any status or id carries.
		s = r.FloatString(64)
	}
	if s[0] == '-' {
		neg = true
		s = s[1:]
	}
	intPart, frac, _ = strings.Cut(s, ".")
	intPart = strings.TrimLeft(intPart, "0")
	if intPart == "" {
		intPart = "0"
	}
	frac = strings.TrimRight(frac, "0")
	return neg, intPart, frac
}

func cmpMagnitude(ai, af, bi, bf string) int {
	if len(ai) != len(bi) {
		if len(ai) < len(bi) {
			return -1
		}
		return 1
	}
	if c := strings.Compare(ai, bi); c != 0 {
		return c
	}
	return strings.Compare(af, bf) // no trailing zeros: lexical order is numeric order
}

// validNumber reports whether s is in JSON number syntax.
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == start {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		f := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == f {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		e := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == e {
			return false // no exponent digits
		}
	}
	return i == len(s)
}

// isCanonical reports whether s is already the canonical form of a decimal:
// optional '-', integer digits without leading zeros, an optional fraction
// without trailing zeros, no exponent, not "-0".
func isCanonical(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intLen := i - start
	if intLen == 0 || (intLen > 1 && s[start] == '0') {
		return false
	}
	if i == len(s) {
		return !(start == 1 && s[1:] == "0") // "-0" is not canonical
	}
	if s[i] != '.' {
		return false
	}
	i++
	f := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i == len(s) && i > f && s[i-1] != '0'
}

// absurdExponent reports an exponent of more than four digits: no status or
// id needs one, and expanding it exactly would cost memory.
func absurdExponent(s string) bool {
	i := strings.IndexAny(s, "eE")
	if i < 0 {
		return false
	}
	digits := strings.TrimLeft(strings.TrimLeft(s[i+1:], "+-"), "0")
	return len(digits) > 4
}
