package order

import (
	"strconv"
	"sync/atomic"
	"time"
)

// Fast paths for the values that repeat in every entry of a page: the
// common timestamp form and short strings. Anything else goes to
// time.Parse and encoding/json.

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
