package state

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
)

func roundTrip(t testing.TB, s diff.State) (diff.State, []byte) {
	t.Helper()
	b := appendState(nil, &s)
	var got diff.State
	if err := decodeState(b, &got); err != nil {
		t.Fatalf("decode %x of %+v: %v", b, s, err)
	}
	if !got.Same(s) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, s)
	}
	return got, b
}

func TestStateEncoding(t *testing.T) {
	states := fixtureStates(t)
	states = append(states,
		typical(1), typical(2), typical(3),
		diff.State{}, // everything absent
		diff.State{
			StatusID:   order.MustDecimal("1e3"),
			LockStatus: "somethingNew",
			TypeID:     -7,
			ReferrerID: order.MustDecimal("-0.50"),
			PlentyID:   1 << 62,
			OwnerID:    "ü\x00\"",
			LocationID: "12.50",
			CreatedAt:  order.Time{Time: time.Date(0, 1, 1, 0, 0, 0, 1, time.FixedZone("", -(23*3600+59*60)))},
			UpdatedAt:  order.Time{Time: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", 14*3600))},
		},
		diff.State{LockStatus: "unlocked", UpdatedAt: ptime(t, "2026-11-22T10:02:41Z")},
	)
	for _, s := range states {
		got, b := roundTrip(t, s)
		// Offsets are kept: events render times as the service sent them.
		if !s.UpdatedAt.IsZero() && got.UpdatedAt.String() != s.UpdatedAt.String() {
			t.Errorf("updatedAt renders %s, want %s", got.UpdatedAt, s.UpdatedAt)
		}
		if !s.CreatedAt.IsZero() && got.CreatedAt.String() != s.CreatedAt.String() {
			t.Errorf("createdAt renders %s, want %s", got.CreatedAt, s.CreatedAt)
		}
		// Every proper prefix is rejected, never a panic.
		for n := 0; n < len(b); n++ {
			var x diff.State
			if err := decodeState(b[:n], &x); !errors.Is(err, errStateValue) {
				t.Errorf("prefix %d of %x: err = %v, want errStateValue", n, b, err)
			}
		}
		// A trailing byte is rejected.
		var x diff.State
		if err := decodeState(append(b, 0), &x); !errors.Is(err, errStateValue) {
			t.Errorf("trailing byte: err = %v", err)
		}
	}
}

func TestStateEncodingSize(t *testing.T) {
	total := 0
	states := fixtureStates(t)
	for i := int64(0); i < 100; i++ {
		states = append(states, typical(i))
	}
	for _, s := range states {
		n := len(appendState(nil, &s))
		if n > 45 {
			t.Errorf("%+v takes %d bytes, want <= 45", s, n)
		}
		total += n
	}
	avg := float64(total) / float64(len(states))
	t.Logf("average %.1f bytes per state over %d states", avg, len(states))
	if avg > 40 {
		t.Errorf("average %.1f bytes per state, want <= 40", avg)
	}
}

func TestDecodeStateRejects(t *testing.T) {
	good := appendState(nil, &diff.State{StatusID: order.MustDecimal("5"), LockStatus: "unlocked", UpdatedAt: ptime(t, "2026-11-22T10:02:41+01:00")})
	for name, b := range map[string][]byte{
		"empty":                 {},
		"version 0":             append([]byte{0}, good[1:]...),
		"version 2":             append([]byte{2}, good[1:]...),
		"reserved flag":         append([]byte{1, good[1] | flagReserved}, good[2:]...),
		"unknown lock code":     append([]byte{1, good[1]&^lockMask | 5<<lockShift}, good[2:]...),
		"nanos without time":    {1, flagCreatedNanos, 0, 0, 0, 0, 0, 0},
		"coded lock as text":    {1, lockText << lockShift, 8, 'u', 'n', 'l', 'o', 'c', 'k', 'e', 'd', 0, 0, 0, 0, 0, 0},
		"bad decimal":           {1, 0, 2, '5', 'x', 0, 0, 0, 0, 0, 0},
		"huge length":           {1, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"overlong varint":       {1, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"zero nanoseconds":      {1, flagUpdated | flagUpdatedNanos, 0, 0, 0, 0, 0, 0, 2, 0, 0},
		"1e9 nanoseconds":       binary.AppendUvarint([]byte{1, flagUpdated | flagUpdatedNanos, 0, 0, 0, 0, 0, 0, 2, 0}, 1e9),
		"zero time set":         append(binary.AppendVarint([]byte{1, flagUpdated, 0, 0, 0, 0, 0, 0}, time.Time{}.Unix()), 0),
		"offset out of range":   {1, flagUpdated, 0, 0, 0, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff, 0x1f},
		"missing updated time":  {1, flagUpdated, 0, 0, 0, 0, 0, 0},
		"text beyond the value": {1, 0, 5, '5'},
	} {
		var s diff.State
		if err := decodeState(b, &s); !errors.Is(err, errStateValue) {
			t.Errorf("%s (%x): err = %v, want errStateValue", name, b, err)
		}
	}
}

func TestDecodeStateAllocations(t *testing.T) {
	b := appendState(nil, new(typical(2)))
	var s diff.State
	if err := decodeState(b, &s); err != nil { // warms the intern table and zone cache
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if err := decodeState(b, &s); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("decodeState allocates %.0f times per state, want 0", allocs)
	}
}

// FuzzDecodeState feeds arbitrary bytes to the decoder: it never panics, and
// a value it accepts re-encodes to a value that decodes to the same state.
func FuzzDecodeState(f *testing.F) {
	for _, s := range fixtureStates(f) {
		f.Add(appendState(nil, &s))
	}
	for i := int64(0); i < 6; i++ {
		f.Add(appendState(nil, new(typical(i))))
	}
	f.Add(appendState(nil, &diff.State{LockStatus: "x", OwnerID: "\xff"}))
	f.Add([]byte{})
	f.Add([]byte{1, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var s diff.State
		if err := decodeState(b, &s); err != nil {
			if !errors.Is(err, errStateValue) {
				t.Fatalf("error %v does not wrap errStateValue", err)
			}
			return
		}
		roundTrip(t, s)
	})
}

// FuzzStateRoundTrip builds states from arbitrary field values: encoding and
// decoding keeps every value (decimals by value, times by instant and offset).
func FuzzStateRoundTrip(f *testing.F) {
	f.Add("5.1", "unlocked", int64(1), "4.01", int64(41523), "3", "1", int64(1763630417), int64(60), int64(0), int64(1763802161), int64(60), int64(0))
	f.Add("", "", int64(0), "", int64(0), "", "", int64(0), int64(0), int64(0), int64(0), int64(0), int64(0))
	f.Add("-0.500", "weird\x00", int64(-1), "1e-3", int64(-9), "\xff", "x", int64(-62167219200), int64(-1439), int64(999999999), int64(253402300799), int64(1439), int64(1))
	f.Fuzz(func(t *testing.T, status, lock string, typeID int64, referrer string, plentyID int64, owner, location string,
		cSec, cOff, cNs, uSec, uOff, uNs int64) {
		dec := func(s string) order.Decimal {
			d, err := order.ParseDecimal(s)
			if err != nil {
				return order.Decimal{}
			}
			return d
		}
		tm := func(sec, off, ns int64) order.Time {
			// Times as the service can send them: years 0000-9999, offsets
			// within a day, whole minutes.
			sec = sec % 400000000000
			off = off % (24 * 60)
			ns = ns % 1e9
			if ns < 0 {
				ns = -ns
			}
			return order.Time{Time: time.Unix(sec, ns).In(time.FixedZone("", int(off)*60))}
		}
		s := diff.State{
			StatusID:   dec(status),
			LockStatus: lock,
			TypeID:     typeID,
			ReferrerID: dec(referrer),
			PlentyID:   plentyID,
			OwnerID:    order.FlexString(owner),
			LocationID: order.FlexString(location),
			CreatedAt:  tm(cSec, cOff, cNs),
			UpdatedAt:  tm(uSec, uOff, uNs),
		}
		got, _ := roundTrip(t, s)
		if got.StatusID.Canonical() != s.StatusID.Canonical() || got.ReferrerID.Canonical() != s.ReferrerID.Canonical() {
			t.Fatalf("decimals changed: %v %v -> %v %v", s.StatusID, s.ReferrerID, got.StatusID, got.ReferrerID)
		}
	})
}
