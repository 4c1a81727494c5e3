package plentysim

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAddOrder(t *testing.T) {
	h := newHarness(t, Config{})
	now := h.clock.Now()
	h.clock.Advance(1500 * time.Millisecond)
	got := h.sim.AddOrder(Order{})
	want := Order{ID: 1000, ReferrerID: "1", PlentyID: DefaultPlentyID, TypeID: 1, LockStatus: LockUnlocked, LocationID: "1",
		CreatedAt: now.Add(time.Second), UpdatedAt: now.Add(time.Second), StatusID: "3"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults\n got  %+v\n want %+v", got, want)
	}

	low := h.sim.AddOrder(Order{ID: 500, StatusID: "05.10", ReferrerID: "+4.01", ItemIDs: []int64{1}})
	if low.StatusID != "5.1" || low.ReferrerID != "4.01" {
		t.Errorf("decimals not normalized to JSON numbers: %+v", low)
	}
	kept := h.sim.AddOrder(Order{StatusID: "5.10"})
	if kept.ID != 1001 || kept.StatusID != "5.10" {
		t.Errorf("next order %+v, want id 1001 keeping status text 5.10", kept)
	}
	var ids []int64
	for _, o := range h.sim.Orders() {
		ids = append(ids, o.ID)
	}
	if !slices.Equal(ids, []int64{500, 1000, 1001}) {
		t.Errorf("Orders ids %v", ids)
	}
	tok := h.login()
	if got := h.search(tok, "sortOrder=asc", nil).ids(t); !slices.Equal(got, ids) {
		t.Errorf("search ids %v", got)
	}
	// The same search again sees an order added since.
	h.sim.AddOrder(Order{ID: 700})
	if got, want := h.search(tok, "sortOrder=asc", nil).ids(t), []int64{500, 700, 1000, 1001}; !slices.Equal(got, want) {
		t.Errorf("search ids after AddOrder %v, want %v", got, want)
	}

	// Copies in and out.
	low.ItemIDs[0] = 99
	if o, _ := h.sim.Order(500); o.ItemIDs[0] != 1 {
		t.Error("AddOrder's result shares the stored slice")
	}
	o, _ := h.sim.Order(500)
	o.ItemIDs[0] = 99
	if o, _ := h.sim.Order(500); o.ItemIDs[0] != 1 {
		t.Error("Order's result shares the stored slice")
	}
	if _, ok := h.sim.Order(4242); ok {
		t.Error("Order(4242) found")
	}

	for _, bad := range []Order{{ID: 1000}, {StatusID: "five"}, {ReferrerID: "1,5"}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AddOrder(%+v) did not panic", bad)
				}
			}()
			h.sim.AddOrder(bad)
		}()
	}
	if n := len(h.sim.History()); n != 4 {
		t.Errorf("history has %d entries, want 4 created", n)
	}
}

func TestMutations(t *testing.T) {
	h := newHarness(t, Config{})
	t0 := h.clock.Now()
	h.sim.AddOrder(Order{StatusID: "5"})
	h.sim.AddOrder(Order{StatusID: "7"})

	h.clock.Advance(1700 * time.Millisecond)
	t1 := t0.Add(time.Second)
	o, err := h.sim.SetStatus(1000, "5.1")
	if err != nil || o.StatusID != "5.1" || !o.UpdatedAt.Equal(t1) {
		t.Fatalf("SetStatus: %+v %v", o, err)
	}
	h.clock.Advance(time.Second)
	t2 := t0.Add(2 * time.Second)
	if o, err := h.sim.SetLock(1001, LockReversible); err != nil || o.LockStatus != LockReversible || !o.UpdatedAt.Equal(t2) {
		t.Fatalf("SetLock: %+v %v", o, err)
	}
	h.clock.Advance(-time.Hour) // a clock going backwards never moves updatedAt back
	if o, err := h.sim.Touch(1001); err != nil || !o.UpdatedAt.Equal(t2) || o.LockStatus != LockReversible {
		t.Fatalf("Touch: %+v %v", o, err)
	}

	for _, err := range []error{
		func() error { _, err := h.sim.SetStatus(1, "5"); return err }(),
		func() error { _, err := h.sim.SetLock(1, LockUnlocked); return err }(),
		func() error { _, err := h.sim.Touch(1); return err }(),
	} {
		if !errors.Is(err, ErrNoOrder) {
			t.Errorf("mutation of a missing order: %v", err)
		}
	}
	if _, err := h.sim.SetStatus(1000, "5,1"); err == nil {
		t.Error("SetStatus accepted 5,1")
	}
	if _, err := h.sim.SetLock(1000, ""); err == nil {
		t.Error("SetLock accepted an empty lock")
	}

	want := []Change{
		{OrderID: 1000, At: t0, Kind: KindCreated},
		{OrderID: 1001, At: t0, Kind: KindCreated},
		{OrderID: 1000, At: t1, Kind: KindStatus, From: "5", To: "5.1"},
		{OrderID: 1001, At: t2, Kind: KindLock, From: LockUnlocked, To: LockReversible},
		{OrderID: 1001, At: t2, Kind: KindTouch},
	}
	if got := h.sim.History(); !reflect.DeepEqual(got, want) {
		t.Errorf("history\n got  %+v\n want %+v", got, want)
	}
	// The search sees the new state.
	if got := h.search(h.login(), "statusId=5.1", nil).ids(t); !slices.Equal(got, []int64{1000}) {
		t.Errorf("search after SetStatus: %v", got)
	}
}

// TestBeforeSearch: an order that leaves the window between two page
// requests of one scan shifts the later pages; totalsCount shows it.
func TestBeforeSearch(t *testing.T) {
	h := newHarness(t, Config{})
	base := h.clock.Now()
	for i := range 6 {
		h.sim.AddOrder(Order{UpdatedAt: base.Add(-time.Duration(10-i) * time.Minute)})
	}
	tok := h.login()
	var (
		mu    sync.Mutex
		pages []int
	)
	h.sim.SetBeforeSearch(func(r *http.Request, page int) {
		mu.Lock()
		pages = append(pages, page)
		mu.Unlock()
		if page == 2 {
			h.clock.Advance(time.Minute)
			if _, err := h.sim.SetStatus(1000, "6"); err != nil {
				t.Error(err)
			}
		}
	})
	window := "sortOrder=asc&itemsPerPage=2&updatedAt=between:" +
		strings.ReplaceAll(base.Add(-time.Hour).Format(time.RFC3339)+","+base.Format(time.RFC3339), "+", "%2B")

	p1 := h.search(tok, window+"&page=1", nil)
	p2 := h.search(tok, window+"&page=2", nil)
	if got := p1.ids(t); p1.TotalsCount != 6 || !slices.Equal(got, []int64{1000, 1001}) {
		t.Errorf("page 1: total %d ids %v", p1.TotalsCount, got)
	}
	// 1000 left the window: 1002 moved to page 1 and is skipped by this scan.
	if got := p2.ids(t); p2.TotalsCount != 5 || !slices.Equal(got, []int64{1003, 1004}) {
		t.Errorf("page 2: total %d ids %v", p2.TotalsCount, got)
	}
	h.sim.SetBeforeSearch(nil)
	h.search(tok, window, nil)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(pages, []int{1, 2}) {
		t.Errorf("BeforeSearch pages %v", pages)
	}
}

func TestGenerate(t *testing.T) {
	from := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(30 * 24 * time.Hour)
	gen := func(seed int64) []Order {
		s := New(Config{Seed: seed})
		s.Generate(500, from, to)
		if len(s.History()) != 0 {
			t.Error("Generate recorded history")
		}
		return s.Orders()
	}
	a := gen(7)
	if b := gen(7); !reflect.DeepEqual(a, b) {
		t.Error("same seed, different orders")
	}
	if c := gen(8); reflect.DeepEqual(a, c) {
		t.Error("seeds 7 and 8 gave the same orders")
	}

	seen := map[string]bool{}
	for i, o := range a {
		if o.ID != int64(firstOrderID+i) {
			t.Fatalf("order %d has id %d", i, o.ID)
		}
		if o.CreatedAt.Before(from) || o.CreatedAt.After(to) || !o.UpdatedAt.Equal(o.CreatedAt) || o.CreatedAt.Nanosecond() != 0 {
			t.Errorf("order %d times %v %v", o.ID, o.CreatedAt, o.UpdatedAt)
		}
		if i > 0 && o.CreatedAt.Before(a[i-1].CreatedAt) {
			t.Errorf("order %d created before order %d", o.ID, a[i-1].ID)
		}
		if i > 0 && o.CreatedAt.Equal(a[i-1].CreatedAt) {
			seen["shared second"] = true
		}
		if strings.Contains(o.StatusID, ".") {
			seen["decimal status"] = true
		}
		if strings.Contains(o.ReferrerID, ".") {
			seen["decimal referrer"] = true
		}
		if o.OwnerID == "" {
			seen["null owner"] = true
		}
		if o.LockStatus != LockUnlocked {
			seen["locked"] = true
		}
		if o.TypeID != 1 {
			seen["other type"] = true
		}
		if o.LocationID != "1" {
			seen["other location"] = true
		}
		if _, ok := o.Relations["contact_receiver"]; !ok {
			seen["no contact"] = true
		}
		if len(o.ItemIDs) > 1 && len(o.ItemIDs) == len(o.VariationIDs) {
			seen["several items"] = true
		}
		if o.Properties[7] != "" {
			seen["external id"] = true
		}
	}
	for _, k := range []string{"decimal status", "decimal referrer", "null owner", "locked", "other type", "other location",
		"no contact", "several items", "external id"} {
		if !seen[k] {
			t.Errorf("no order with %s", k)
		}
	}
	// 500 orders in 30 days rarely share a second; a dense burst does.
	s := New(Config{})
	s.Generate(100, from, from.Add(10*time.Second))
	orders := s.Orders()
	if orders[0].CreatedAt.Equal(orders[len(orders)-1].CreatedAt) || !orders[1].CreatedAt.Equal(orders[2].CreatedAt) {
		t.Errorf("dense burst: %v .. %v", orders[0].CreatedAt, orders[len(orders)-1].CreatedAt)
	}
}

func TestMutateRandom(t *testing.T) {
	run := func(seed int64) (*Server, []Change) {
		c := newClock()
		s := New(Config{Seed: seed, Now: c.Now})
		s.Generate(100, c.Now().Add(-24*time.Hour), c.Now().Add(-time.Hour))
		c.Advance(time.Hour)
		return s, s.MutateRandom(200)
	}
	s, changes := run(5)
	_, again := run(5)
	if !reflect.DeepEqual(changes, again) {
		t.Error("same seed, different mutations")
	}
	if !reflect.DeepEqual(s.History(), changes) {
		t.Error("History differs from the returned changes")
	}
	kinds := map[string]int{}
	now := newClock().Now().Add(time.Hour)
	for _, ch := range changes {
		kinds[ch.Kind]++
		if !ch.At.Equal(now) {
			t.Errorf("change %+v not at %v", ch, now)
		}
		o, ok := s.Order(ch.OrderID)
		if !ok || !o.UpdatedAt.Equal(now) {
			t.Errorf("order of %+v: %+v", ch, o)
		}
		if ch.Kind == KindStatus {
			a, _ := parseDecimal(ch.From)
			b, _ := parseDecimal(ch.To)
			if a.cmp(b) == 0 || !slices.Contains(defaultMutatorStatuses, ch.To) {
				t.Errorf("status change %+v", ch)
			}
		}
	}
	if kinds[KindStatus] < 80 || kinds[KindLock] < 20 || kinds[KindCreated] < 20 || kinds[KindTouch] != 0 {
		t.Errorf("kinds %v for weights 6:2:2:0", kinds)
	}
	if n := len(s.Orders()); n != 100+kinds[KindCreated] {
		t.Errorf("%d orders after %d creations", n, kinds[KindCreated])
	}
}

func TestRunMutator(t *testing.T) {
	run := func(cfg MutatorConfig) []Change {
		s := New(Config{Seed: 9, Now: newClock().Now})
		s.Generate(50, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan Change)
		cfg.Rate = 1000
		cfg.OnChange = func(c Change) {
			select {
			case got <- c:
			case <-ctx.Done():
			}
		}
		done := make(chan struct{})
		go func() {
			s.RunMutator(ctx, cfg)
			close(done)
		}()
		var changes []Change
		for range 20 {
			changes = append(changes, <-got)
		}
		cancel()
		<-done
		if h := s.History(); len(h) < 20 || !reflect.DeepEqual(h[:20], changes) {
			t.Errorf("history %v does not start with the reported changes", h)
		}
		return changes
	}
	a := run(MutatorConfig{})
	if b := run(MutatorConfig{}); !reflect.DeepEqual(a, b) {
		t.Errorf("same seed, different mutator sequence:\n%v\n%v", a, b)
	}
	for _, ch := range run(MutatorConfig{TouchWeight: 1, Statuses: []string{"1"}}) {
		if ch.Kind != KindTouch {
			t.Errorf("touch-only mutator made %+v", ch)
		}
	}
	for _, ch := range run(MutatorConfig{StatusWeight: 1, Statuses: []string{"4", "5.10"}}) {
		if ch.Kind != KindStatus || (ch.To != "4" && ch.To != "5.10") {
			t.Errorf("status mutator made %+v", ch)
		}
	}
	for _, bad := range []MutatorConfig{{Rate: -1}, {Statuses: []string{"x"}}, {LockWeight: -2}} {
		if bad.Validate() == nil {
			t.Errorf("Validate(%+v) passed", bad)
		}
	}
}

// TestConcurrentUse exercises every entry point at once (for -race).
func TestConcurrentUse(t *testing.T) {
	h := newHarness(t, Config{MaxSessions: 8, Limits: Limits{ShortLimit: 1 << 20}})
	h.sim.Generate(300, h.clock.Now().Add(-time.Hour), h.clock.Now())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { h.sim.RunMutator(ctx, MutatorConfig{Rate: 5000}) })
	h.sim.SetBeforeSearch(func(*http.Request, int) { h.sim.MutateRandom(1) })
	var clients sync.WaitGroup
	for i := range 4 {
		clients.Go(func() {
			tok := h.login()
			for j := range 15 {
				q := fmt.Sprintf("itemsPerPage=%d&page=%d&statusId=gte:%d", 10+i, 1+j%3, 3+j%5)
				body := []byte(`{"conditionType":"or","fields":[{"field":"orderTypeId","operator":"in","value":[1,3]}]}`)
				if r := h.do(http.MethodPost, PathSearch+"?"+q, tok, body); r.status != http.StatusOK {
					t.Errorf("search: %d %s", r.status, r.body)
				}
				h.clock.Advance(time.Second)
			}
		})
	}
	clients.Go(func() {
		for range 50 {
			h.sim.SetLimits(Limits{ShortLimit: 1 << 20})
			h.sim.SetFaults(Faults{})
			_ = h.sim.Stats()
			_ = h.sim.History()
			_ = h.sim.Orders()
			if _, err := h.sim.Touch(1000); err != nil {
				t.Error(err)
			}
			h.sim.AddOrder(Order{})
		}
	})
	clients.Wait()
	cancel()
	wg.Wait()
}
