package state

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
)

// fixtureStates returns the states of every decodable fixture entry.
func fixtureStates(t testing.TB) []diff.State {
	t.Helper()
	files, err := filepath.Glob("../plenty/testdata/search-page*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v (%d files)", err, len(files))
	}
	sort.Strings(files)
	var out []diff.State
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := order.DecodePage(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range p.Orders {
			out = append(out, diff.StateOf(o))
		}
	}
	return out
}

func ptime(t testing.TB, s string) order.Time {
	t.Helper()
	v, err := order.ParseTime(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// typical returns a typical order state that varies with i, as a sweep
// sees them: statuses 3..7 with some decimals, most unlocked.
func typical(i int64) diff.State {
	statuses := [...]string{"3", "4", "5", "5.1", "6", "7"}
	locks := [...]string{"unlocked", "unlocked", "unlocked", "permanentlyLocked"}
	created := time.Unix(1763000000+i*37, 0).In(time.FixedZone("", 3600))
	return diff.State{
		StatusID:   order.MustDecimal(statuses[i%int64(len(statuses))]),
		LockStatus: locks[i%int64(len(locks))],
		TypeID:     1,
		ReferrerID: order.MustDecimal("4.01"),
		PlentyID:   41523,
		OwnerID:    "3",
		LocationID: "1",
		CreatedAt:  order.Time{Time: created},
		UpdatedAt:  order.Time{Time: created.Add(time.Duration(i%5000) * time.Second)},
	}
}

func openT(t testing.TB, path string, opt Options) *Store {
	t.Helper()
	s, err := Open(path, opt)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func lookup(t testing.TB, s *Store, ids ...int64) []*diff.State {
	t.Helper()
	out := make([]*diff.State, len(ids))
	if err := s.Lookup(ids, out); err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	return out
}
