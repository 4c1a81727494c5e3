package state

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
)

func TestDwell(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	if d, err := s.Dwell(); err != nil || len(d) != 0 {
		t.Fatalf("empty snapshot: %+v, %v", d, err)
	}
	noStatus := at(t, "5", "2026-11-22T10:00:00Z", "")
	noStatus.StatusID = order.Decimal{}
	noTime := diff.State{StatusID: order.MustDecimal("7")}
	lockText := at(t, "5.1", "2026-11-22T10:00:00Z", "2026-11-10T00:00:00+01:00")
	lockText.LockStatus = "somethingNew" // stored as text: the scan skips it
	if err := s.Commit(Commit{States: []Put{
		{1, at(t, "5", "2026-11-22T10:00:00Z", "2026-11-15T12:00:00+01:00")},
		{2, at(t, "5", "2026-11-14T10:00:00Z", "")}, // unknown since: updatedAt, the oldest of 5
		{3, at(t, "5.10", "2026-11-22T10:00:00.25+01:00", "2026-11-16T12:00:00.75+01:00")},
		{4, lockText},
		{5, at(t, "10", "2026-11-22T10:00:00Z", "")},
		{6, noStatus},
		{7, noTime},
		{8, at(t, "7", "2026-11-21T10:00:00Z", "")},
	}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Dwell()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		status string
		orders int
		oldest string
	}{
		{"", 1, "2026-11-22T10:00:00Z"},
		{"5", 2, "2026-11-14T10:00:00Z"},
		{"5.1", 2, "2026-11-09T23:00:00Z"},
		{"7", 2, "2026-11-21T10:00:00Z"}, // order 7 has no time: counted, not the oldest
		{"10", 1, "2026-11-22T10:00:00Z"},
	}
	if len(got) != len(want) {
		t.Fatalf("Dwell = %+v, want %d statuses", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Status.Canonical() != w.status || g.Orders != w.orders || g.Oldest.Format(time.RFC3339Nano) != w.oldest {
			t.Errorf("status %d: %s %d %s, want %s %d %s", i, g.Status, g.Orders, g.Oldest.Format(time.RFC3339Nano), w.status, w.orders, w.oldest)
		}
	}
	// A value with another form of a status number (appendState never
	// writes one) counts with its status.
	odd := appendState(nil, new(at(t, "7", "2026-11-01T00:00:00Z", "")))
	odd = append(append(odd[:2:2], 2, '0', '7'), odd[4:]...)
	if err := s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOrders).Put(binary.BigEndian.AppendUint64(nil, 9), odd)
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Dwell(); err != nil || len(got) != 5 || got[3].Orders != 3 || got[3].Oldest.Format(time.RFC3339) != "2026-11-01T00:00:00Z" {
		t.Errorf("with status 07: %+v, %v; want 3 orders in 7, the oldest 2026-11-01", got, err)
	}

	only := openT(t, tempPath(t), Options{})
	if err := only.Commit(Commit{States: []Put{{1, noTime}}}); err != nil {
		t.Fatal(err)
	}
	if d, err := only.Dwell(); err != nil || len(d) != 1 || d[0].Orders != 1 || !d[0].Oldest.IsZero() {
		t.Errorf("a status without any time: %+v, %v", d, err)
	}
}

// TestPeekDwellAgreesWithDecode: the scan's reading of status and since is
// decodeState's, for every shape of value; a cut value is an error.
func TestPeekDwellAgreesWithDecode(t *testing.T) {
	states := append(fixtureStates(t), typical(1), typical(3), diff.State{},
		withSince(typical(4), ptime(t, "2026-11-01T08:00:00.123+01:00")),
		diff.State{LockStatus: "x", StatusID: order.MustDecimal("1e3"), StatusSince: ptime(t, "2026-11-01T00:00:00Z")},
		diff.State{CreatedAt: ptime(t, "2026-11-01T00:00:00.5Z"), UpdatedAt: ptime(t, "2026-11-02T00:00:00.5Z")})
	for _, s := range states {
		for _, b := range [][]byte{appendState(nil, &s), version1IfPossible(appendState(nil, &s))} {
			checkPeek(t, b)
		}
	}
}

func version1IfPossible(b []byte) []byte {
	if b[1]&flagSince != 0 {
		return b
	}
	return version1(b)
}

func checkPeek(t *testing.T, b []byte) {
	t.Helper()
	var d diff.State
	derr := decodeState(b, &d)
	status, since, known, perr := peekDwell(b)
	if derr != nil {
		return // peekDwell checks less; Dwell reports what it cannot read
	}
	if perr != nil {
		t.Fatalf("%x: peekDwell: %v; decodeState read %+v", b, perr, d)
	}
	// By value: appendState writes canonical text, but decodeState also
	// reads other forms of a number ("05"), and so does Dwell.
	ps, perr := order.ParseDecimal(string(status))
	if len(status) == 0 {
		ps, perr = order.Decimal{}, nil
	}
	if perr != nil || !ps.Equal(d.StatusID) || known != !d.StatusSince.IsZero() || known && since != saturatedNano(d.StatusSince.Time) {
		t.Errorf("%x: peekDwell %q %d %v, decodeState %q %v", b, status, since, known, d.StatusID.Canonical(), d.StatusSince)
	}
	for n := 0; n < len(b); n++ {
		if _, _, _, err := peekDwell(b[:n]); !errors.Is(err, errStateValue) {
			// A prefix may end exactly after the fields peekDwell reads:
			// then it must agree with the whole value.
			if s2, t2, k2, _ := peekDwell(b[:n]); string(s2) != string(status) || t2 != since || k2 != known {
				t.Errorf("prefix %d of %x: %v", n, b, err)
			}
		}
	}
}

// saturatedNano is t in unix nanoseconds, the extremes of int64 beyond
// them (the years 1678-2262).
func saturatedNano(t time.Time) int64 {
	const maxSec = math.MaxInt64/1_000_000_000 - 1
	switch sec := t.Unix(); {
	case sec > maxSec:
		return math.MaxInt64
	case sec < -maxSec:
		return math.MinInt64
	}
	return t.UnixNano()
}

// FuzzPeekDwell: on every value decodeState accepts, the scan reads the
// same status and since; it never panics on any input.
func FuzzPeekDwell(f *testing.F) {
	for i := int64(0); i < 6; i++ {
		f.Add(appendState(nil, new(typical(i))))
	}
	f.Add(appendState(nil, new(withSince(typical(7), ptime(f, "2026-11-01T08:00:00.25+01:00")))))
	f.Add(version1(appendState(nil, new(typical(8)))))
	f.Fuzz(func(t *testing.T, b []byte) { checkPeek(t, b) })
}

func TestListOrders(t *testing.T) {
	s := openT(t, tempPath(t), Options{})
	var ps []Put
	for id := int64(1); id <= 30; id++ {
		status := []string{"5", "6", "5.1"}[id%3]
		// Order id entered its status id days before 2026-11-30.
		since := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC).Add(-time.Duration(id) * 24 * time.Hour)
		ps = append(ps, Put{id * 10, at(t, status, "2026-11-30T00:00:00Z", since.Format(time.RFC3339))})
	}
	noStatus := at(t, "5", "2026-11-30T00:00:00Z", "")
	noStatus.StatusID = order.Decimal{}
	ps = append(ps, Put{1000, noStatus})
	if err := s.Commit(Commit{States: ps}); err != nil {
		t.Fatal(err)
	}
	five, fiveTen, none := order.MustDecimal("5"), order.MustDecimal("5.10"), order.Decimal{}
	// all pages the listing gives, with their sizes.
	all := func(f ListFilter, limit int) (ids []int64, sizes []int) {
		t.Helper()
		for range 100 {
			page, next, err := s.ListOrders(f, limit)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(page))
			for _, o := range page {
				ids = append(ids, o.ID)
			}
			if next == 0 {
				return ids, sizes
			}
			if next <= f.AfterID {
				t.Fatalf("cursor %d does not advance past %d", next, f.AfterID)
			}
			f.AfterID = next
		}
		t.Fatal("the listing does not end")
		return nil, nil
	}
	ids := func(from, to, step int64) []int64 {
		var out []int64
		for id := from; id <= to; id += step {
			out = append(out, id*10)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		f     ListFilter
		limit int
		want  []int64
		sizes []int
	}{
		{name: "every order, pages of 7", f: ListFilter{}, limit: 7, want: append(ids(1, 30, 1), 1000), sizes: []int{7, 7, 7, 7, 3}},
		{name: "status 5", f: ListFilter{Status: &five}, limit: 4, want: ids(3, 30, 3), sizes: []int{4, 4, 2}},
		{name: "status 5.10 is 5.1", f: ListFilter{Status: &fiveTen}, limit: 100, want: ids(2, 30, 3), sizes: []int{10}},
		{name: "without a status", f: ListFilter{Status: &none}, limit: 100, want: []int64{1000}, sizes: []int{1}},
		{name: "status 5 for more than 20 days", f: ListFilter{Status: &five, EnteredBefore: time.Date(2026, 11, 10, 0, 0, 0, 0, time.UTC)}, limit: 2,
			want: ids(21, 30, 3), sizes: []int{2, 2, 0}}, // a full page says "more may follow"
		{name: "entered exactly at the bound is not before it", f: ListFilter{EnteredBefore: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}, limit: 100, want: ids(30, 30, 1), sizes: []int{1}},
		{name: "after a cursor", f: ListFilter{Status: &five, AfterID: 150}, limit: 100, want: ids(18, 30, 3), sizes: []int{5}},
		{name: "after the last order", f: ListFilter{AfterID: 1000}, limit: 100, want: nil, sizes: []int{0}},
		{name: "limit 0 is ListMax", f: ListFilter{}, limit: 0, want: append(ids(1, 30, 1), 1000), sizes: []int{31}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, sizes := all(tc.f, tc.limit)
			if !slices.Equal(got, tc.want) || !slices.Equal(sizes, tc.sizes) {
				t.Errorf("ids %v in pages %v, want %v in %v", got, sizes, tc.want, tc.sizes)
			}
		})
	}
	page, _, err := s.ListOrders(ListFilter{Status: &five}, 1)
	if err != nil || len(page) != 1 {
		t.Fatal(page, err)
	}
	if want := ps[2].State; page[0].ID != 30 || !page[0].State.Same(want) || page[0].State.StatusSince.String() != want.StatusSince.String() {
		t.Errorf("listed %+v, want order 30 with %+v", page[0], want)
	}
	b, _ := json.Marshal(page[0].State) // the state as an event carries it
	if !json.Valid(b) {
		t.Errorf("state JSON %s", b)
	}
}

// TestListOrdersScanBound: a call examines at most ListScanMax orders;
// a rare filter gets short (even empty) pages with a cursor, and the
// listing still ends with every match.
func TestListOrdersScanBound(t *testing.T) {
	s := openT(t, tempPath(t), Options{NoSync: true})
	n := int64(ListScanMax + ListScanMax/2)
	fill(t, s, n)
	rare := at(t, "99", "2026-11-30T00:00:00Z", "")
	if err := s.Commit(Commit{States: []Put{{n + 1, rare}}}); err != nil {
		t.Fatal(err)
	}
	st := order.MustDecimal("99")
	page, next, err := s.ListOrders(ListFilter{Status: &st}, 10)
	if err != nil || len(page) != 0 || next != ListScanMax {
		t.Fatalf("first call: %d orders, next %d, %v; want none, next %d", len(page), next, err, ListScanMax)
	}
	page, next, err = s.ListOrders(ListFilter{Status: &st, AfterID: next}, 10)
	if err != nil || len(page) != 1 || page[0].ID != n+1 || next != 0 {
		t.Fatalf("second call: %+v, next %d, %v; want order %d and the end", page, next, err, n+1)
	}
}
