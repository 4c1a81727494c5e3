package plentysim

import (
	"errors"
	"strconv"
	"strings"
)

// decimal is an exact decimal number: sign, integer digits without leading
// zeros and fraction digits without trailing zeros. Comparing two decimals
// never goes through float64, so 5.1 == 5.10 < 5.7 < 11.1 hold exactly.
type decimal struct {
	neg  bool
	ip   string // integer digits, no leading zeros ("" is 0)
	frac string // fraction digits, no trailing zeros
}

// maxExponent bounds the exponent of a decimal in exponent form, so that a
// hostile "1e999999999" cannot make the simulator build a huge string.
const maxExponent = 100

var errNotDecimal = errors.New("not a decimal number")

// parseDecimal accepts an optional sign, digits, an optional fraction and an
// optional exponent ("5", "-3", "+5.10", "7.01", "1e2", "5.1E-1"). It
// allocates only when an exponent has to be applied.
func parseDecimal(s string) (decimal, error) {
	var d decimal
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		d.neg = s[i] == '-'
		i++
	}
	start := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	ip := s[start:i]
	if ip == "" {
		return decimal{}, errNotDecimal
	}
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == fs {
			return decimal{}, errNotDecimal
		}
		frac = s[fs:i]
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		es := i
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		ds := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == ds || i-ds > 4 {
			return decimal{}, errNotDecimal
		}
		e, err := strconv.Atoi(s[es:i])
		if err != nil || e > maxExponent || e < -maxExponent {
			return decimal{}, errNotDecimal
		}
		exp = e
	}
	if i != len(s) {
		return decimal{}, errNotDecimal
	}
	if exp > 0 {
		if len(frac) >= exp {
			ip, frac = ip+frac[:exp], frac[exp:]
		} else {
			ip, frac = ip+frac+strings.Repeat("0", exp-len(frac)), ""
		}
	} else if exp < 0 {
		n := -exp
		if len(ip) > n {
			ip, frac = ip[:len(ip)-n], ip[len(ip)-n:]+frac
		} else {
			ip, frac = "", strings.Repeat("0", n-len(ip))+ip+frac
		}
	}
	d.ip = strings.TrimLeft(ip, "0")
	d.frac = strings.TrimRight(frac, "0")
	if d.ip == "" && d.frac == "" {
		d.neg = false
	}
	return d, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// cmp returns -1, 0 or +1 as d is less than, equal to or greater than e.
func (d decimal) cmp(e decimal) int {
	if d.neg != e.neg {
		if d.neg {
			return -1
		}
		return 1
	}
	c := d.cmpAbs(e)
	if d.neg {
		return -c
	}
	return c
}

func (d decimal) cmpAbs(e decimal) int {
	if len(d.ip) != len(e.ip) {
		if len(d.ip) < len(e.ip) {
			return -1
		}
		return 1
	}
	if c := strings.Compare(d.ip, e.ip); c != 0 {
		return c
	}
	// Without trailing zeros, the fraction digits compare lexicographically.
	return strings.Compare(d.frac, e.frac)
}

// String returns the canonical form: no exponent, no leading zeros, no
// trailing fraction zeros, no "+", no negative zero ("05.10" -> "5.1").
func (d decimal) String() string {
	var b strings.Builder
	if d.neg {
		b.WriteByte('-')
	}
	if d.ip == "" {
		b.WriteByte('0')
	} else {
		b.WriteString(d.ip)
	}
	if d.frac != "" {
		b.WriteByte('.')
		b.WriteString(d.frac)
	}
	return b.String()
}

// isJSONNumberText reports whether s is a plain decimal in JSON number syntax
// without exponent: -?(0|[1-9][0-9]*)(\.[0-9]+)?. Such text is kept as given
// (so "5.10" stays "5.10" on the wire); other accepted forms are canonicalized.
func isJSONNumberText(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return false
	}
	if s[i] == '0' {
		i++
	} else {
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

// normalizeDecimalText validates the decimal text of an order field and
// returns the text to store: unchanged when it is already valid JSON number
// text, else the canonical form.
func normalizeDecimalText(s string) (string, error) {
	d, err := parseDecimal(s)
	if err != nil {
		return "", err
	}
	if isJSONNumberText(s) {
		return s, nil
	}
	return d.String(), nil
}
