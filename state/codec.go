package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
)

// The compact encoding of a diff.State in the orders bucket (version 2):
//
//	byte     version (2)
//	byte     flags: bit 0 createdAt set, bit 1 createdAt has nanoseconds,
//	         bit 2 updatedAt set, bit 3 updatedAt has nanoseconds,
//	         bits 4-6 lock code (see lockCodes; 7 = text follows),
//	         bit 7 statusSince differs from updatedAt
//	[text]   lockStatus when the lock code is 7
//	text     statusId, canonical decimal ("" = absent)
//	varint   typeId
//	text     referrerId, canonical decimal
//	varint   plentyId
//	text     ownerId
//	text     locationId
//	[time]   createdAt when set
//	[time]   updatedAt when set
//	[since]  statusSince when bit 7 is set
//
// text is a uvarint length and the bytes; varint is zig-zag (encoding/binary);
// time is varint unix seconds, varint UTC offset in minutes and, when flagged,
// a uvarint of nanoseconds (1..999999999); since is varint unix seconds,
// varint offset in minutes and a uvarint of nanoseconds (0..999999999). A
// typical order takes about 30 bytes; one whose status was entered before
// its last update about 7 more.
//
// Without bit 7 statusSince is updatedAt: the order entered its status at
// its last update, or statusSince is unknown (zero). Version 1 is version 2
// without statusSince (bit 7 reserved, zero); its values, written before
// the snapshot kept statusSince, decode with statusSince = updatedAt and are
// written as version 2 with the order's next change.
const stateVersion = 2

// stateVersion1 is the encoding before statusSince; it is still decoded.
const stateVersion1 = 1

const (
	flagCreated      = 1 << 0
	flagCreatedNanos = 1 << 1
	flagUpdated      = 1 << 2
	flagUpdatedNanos = 1 << 3
	lockShift        = 4
	lockMask         = 7 << lockShift
	lockText         = 7
	flagSince        = 1 << 7 // version 2; reserved (zero) in version 1
)

// lockCodes are the lock values with a one-byte code; code 0 is "".
var lockCodes = [...]string{1: "unlocked", 2: "permanentlyLocked", 3: "reversibleLocked"}

// errStateValue is wrapped by every decoding error.
var errStateValue = errors.New("bad order state value")

// appendState appends the compact encoding of s.
func appendState(dst []byte, s *diff.State) []byte {
	var flags byte
	lock := byte(lockText)
	for code, v := range lockCodes {
		if v == s.LockStatus {
			lock = byte(code)
			break
		}
	}
	flags |= lock << lockShift
	if !s.CreatedAt.IsZero() {
		flags |= flagCreated
		if s.CreatedAt.Nanosecond() != 0 {
			flags |= flagCreatedNanos
		}
	}
	if !s.UpdatedAt.IsZero() {
		flags |= flagUpdated
		if s.UpdatedAt.Nanosecond() != 0 {
			flags |= flagUpdatedNanos
		}
	}
	if !s.StatusSince.IsZero() && !sameTime(s.StatusSince.Time, s.UpdatedAt.Time) {
		flags |= flagSince
	}
	dst = append(dst, stateVersion, flags)
	if lock == lockText {
		dst = appendText(dst, s.LockStatus)
	}
	dst = appendText(dst, s.StatusID.Canonical())
	dst = binary.AppendVarint(dst, s.TypeID)
	dst = appendText(dst, s.ReferrerID.Canonical())
	dst = binary.AppendVarint(dst, s.PlentyID)
	dst = appendText(dst, string(s.OwnerID))
	dst = appendText(dst, string(s.LocationID))
	if flags&flagCreated != 0 {
		dst = appendTime(dst, s.CreatedAt.Time)
	}
	if flags&flagUpdated != 0 {
		dst = appendTime(dst, s.UpdatedAt.Time)
	}
	if flags&flagSince != 0 {
		_, off := s.StatusSince.Zone()
		dst = binary.AppendVarint(dst, s.StatusSince.Unix())
		dst = binary.AppendVarint(dst, int64(off/60))
		dst = binary.AppendUvarint(dst, uint64(s.StatusSince.Nanosecond()))
	}
	return dst
}

// sameTime: same instant and same offset in minutes (what the encoding
// keeps). The zero time is only the same as itself.
func sameTime(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	_, ao := a.Zone()
	_, bo := b.Zone()
	return a.Equal(b) && ao/60 == bo/60
}

func appendText(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendTime(dst []byte, t time.Time) []byte {
	_, off := t.Zone()
	dst = binary.AppendVarint(dst, t.Unix())
	dst = binary.AppendVarint(dst, int64(off/60))
	if ns := t.Nanosecond(); ns != 0 {
		dst = binary.AppendUvarint(dst, uint64(ns))
	}
	return dst
}

// decodeState decodes a value written by appendState (version 2, or
// version 1 of an older binary) into s. It rejects a truncated, overlong or
// otherwise corrupt value with an error wrapping errStateValue; it never
// panics. The strings of s do not alias b. StatusSince is set whenever
// UpdatedAt is (see the encoding).
func decodeState(b []byte, s *diff.State) error {
	d := decoder{b: b}
	v := d.byte()
	if d.err == nil && v != stateVersion && v != stateVersion1 {
		return fmt.Errorf("%w: encoding version %d, want %d or %d", errStateValue, v, stateVersion1, stateVersion)
	}
	flags := d.byte()
	if d.err != nil {
		return d.err
	}
	if v == stateVersion1 && flags&flagSince != 0 {
		return fmt.Errorf("%w: reserved flag set in version 1 (%#x)", errStateValue, flags)
	}
	if flags&flagCreatedNanos != 0 && flags&flagCreated == 0 || flags&flagUpdatedNanos != 0 && flags&flagUpdated == 0 {
		return fmt.Errorf("%w: nanoseconds flag without a time (%#x)", errStateValue, flags)
	}
	*s = diff.State{}
	switch code := (flags & lockMask) >> lockShift; {
	case code == lockText:
		s.LockStatus = d.text()
		if d.err == nil {
			for _, v := range lockCodes {
				if v == s.LockStatus {
					return fmt.Errorf("%w: lock %q written as text", errStateValue, v)
				}
			}
		}
	case int(code) < len(lockCodes):
		s.LockStatus = lockCodes[code]
	default:
		return fmt.Errorf("%w: unknown lock code %d", errStateValue, code)
	}
	s.StatusID = d.decimal("statusId")
	s.TypeID = d.varint()
	s.ReferrerID = d.decimal("referrerId")
	s.PlentyID = d.varint()
	s.OwnerID = order.FlexString(d.text())
	s.LocationID = order.FlexString(d.text())
	if flags&flagCreated != 0 {
		s.CreatedAt = order.Time{Time: d.time(flags&flagCreatedNanos != 0)}
	}
	if flags&flagUpdated != 0 {
		s.UpdatedAt = order.Time{Time: d.time(flags&flagUpdatedNanos != 0)}
	}
	s.StatusSince = s.UpdatedAt
	if flags&flagSince != 0 {
		s.StatusSince = order.Time{Time: d.since()}
	}
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errStateValue, len(d.b))
	}
	return nil
}

// decoder reads fields; after the first error every read returns a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errStateValue, what)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail("text longer than the value")
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) text() string {
	return intern(d.bytes())
}

func (d *decoder) decimal(what string) order.Decimal {
	b := d.bytes()
	if d.err != nil || len(b) == 0 {
		return order.Decimal{}
	}
	v, err := order.ParseDecimal(intern(b))
	if err != nil {
		d.fail(what + ": not a decimal")
	}
	return v
}

func (d *decoder) time(nanos bool) time.Time {
	sec := d.varint()
	off := d.varint()
	var ns uint64
	if nanos {
		ns = d.uvarint()
		if d.err == nil && ns == 0 {
			d.fail("nanoseconds out of range")
		}
	}
	return d.instant(sec, off, ns)
}

// since reads a statusSince: seconds, offset, nanoseconds (0 allowed).
func (d *decoder) since() time.Time {
	sec := d.varint()
	off := d.varint()
	return d.instant(sec, off, d.uvarint())
}

// instant checks and builds a time read by time or since.
func (d *decoder) instant(sec, off int64, ns uint64) time.Time {
	if d.err == nil && ns >= 1e9 {
		d.fail("nanoseconds out of range")
	}
	if d.err != nil {
		return time.Time{}
	}
	if off < math.MinInt32/60 || off > math.MaxInt32/60 {
		d.fail("offset out of range")
		return time.Time{}
	}
	t := time.Unix(sec, int64(ns)).In(zone(int(off)))
	if t.IsZero() {
		d.fail("zero time flagged as set")
	}
	return t
}

// zones caches the fixed zones of the offsets within a day, so decoding a
// state does not allocate a *time.Location per timestamp.
var zones [2*24*60 + 1]atomic.Pointer[time.Location]

func zone(minutes int) *time.Location {
	if minutes == 0 {
		return time.UTC
	}
	i := minutes + 24*60
	if i < 0 || i >= len(zones) {
		return time.FixedZone("", minutes*60)
	}
	if l := zones[i].Load(); l != nil {
		return l
	}
	l := time.FixedZone("", minutes*60)
	zones[i].Store(l)
	return l
}

// intern returns short texts (statuses, owners, locations, locks) as shared
// strings: most orders carry one of a few values, and decoding a page of
// states should not allocate each of them again.
func intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > 16 {
		return string(b)
	}
	cur := *internMap.Load()
	if s, ok := cur[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(cur) >= internMax {
		return s
	}
	internMu.Lock()
	defer internMu.Unlock()
	old := *internMap.Load()
	if v, ok := old[s]; ok {
		return v
	}
	if len(old) < internMax {
		// Copy on write: readers never lock. New values are rare (a new
		// status, owner or location), and the table is bounded.
		m := make(map[string]string, len(old)+1)
		for k, v := range old {
			m[k] = v
		}
		m[s] = s
		internMap.Store(&m)
	}
	return s
}

// internMax bounds the interned texts: owner ids may be many.
const internMax = 1024

var (
	internMu  sync.Mutex // serialises writers of internMap
	internMap atomic.Pointer[map[string]string]
)

func init() {
	m := make(map[string]string)
	for _, v := range lockCodes {
		if v != "" {
			m[v] = v
		}
	}
	internMap.Store(&m)
}
