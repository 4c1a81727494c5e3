package plentysim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Order is an order of the simulated system.
type Order struct {
	ID           int64
	ReferrerID   string // decimal text, e.g. "1", "4.01"
	PlentyID     int64
	TypeID       int64
	LockStatus   string // "unlocked", "permanentlyLocked", "reversibleLocked"
	LocationID   string
	OwnerID      string // "" is rendered as null
	CreatedAt    time.Time
	UpdatedAt    time.Time // always whole seconds (the service's resolution)
	StatusID     string    // decimal text, e.g. "5", "5.1", "11.1"
	ItemIDs      []int64
	VariationIDs []int64
	Properties   map[int]string   // orderProperty_<typeId> -> value
	Relations    map[string]int64 // "contact_receiver" -> id, "warehouse_sender" -> id, ...

	// Addresses, Amounts and Payments are rendered when a search asks for
	// them with with= (see relations.go); Generate fills them.
	Addresses []Address
	Amounts   []Amount
	Payments  []Payment
	// Raw holds extra members of the entry as JSON text, rendered verbatim
	// (unchecked) on every search; one named like a relation ("addresses")
	// takes that relation's place. For tests of shapes the service might send.
	Raw map[string]string
}

// Change is one entry of the mutation history, in the order applied.
type Change struct {
	OrderID  int64
	At       time.Time // the order's new updatedAt
	Kind     string    // "created", "status", "lock", "touch"
	From, To string    // old/new status or lock text ("" for created/touch)
}

// Change kinds.
const (
	KindCreated = "created"
	KindStatus  = "status"
	KindLock    = "lock"
	KindTouch   = "touch"
)

// Lock states of the real service.
const (
	LockUnlocked   = "unlocked"
	LockPermanent  = "permanentlyLocked"
	LockReversible = "reversibleLocked"
)

const (
	firstOrderID = 1000
	// DefaultPlentyID is the plentyId of AddOrder orders that have none.
	DefaultPlentyID = 41523
)

// PHPZeroDate is the zero date of the real service's PHP backend,
// rendered as "-0001-11-30T00:00:00+01:00". Use it as CreatedAt to produce
// that quirk; filters treat it as null.
var PHPZeroDate = time.Date(-1, time.November, 30, 0, 0, 0, 0, time.FixedZone("", 3600))

// ErrNoOrder is returned by mutations of an order id that does not exist.
var ErrNoOrder = errors.New("plentysim: no such order")

func cloneOrder(o Order) Order {
	o.ItemIDs = slices.Clone(o.ItemIDs)
	o.VariationIDs = slices.Clone(o.VariationIDs)
	o.Properties = maps.Clone(o.Properties)
	o.Relations = maps.Clone(o.Relations)
	o.Addresses = slices.Clone(o.Addresses)
	o.Amounts = slices.Clone(o.Amounts)
	o.Payments = slices.Clone(o.Payments)
	o.Raw = maps.Clone(o.Raw)
	return o
}

// nowSecond is the server clock truncated to the service's resolution.
func (s *Server) nowSecond() time.Time { return s.cfg.Now().Truncate(time.Second) }

// AddOrder stores an order and records a "created" Change. Defaults: ID 0
// takes the next id (ids start at 1000 and increase); zero CreatedAt or
// UpdatedAt take now; both are truncated to whole seconds; empty StatusID is
// "3", empty LockStatus "unlocked", TypeID 0 is 1 (sales order), empty
// ReferrerID "1", PlentyID 0 DefaultPlentyID, empty LocationID "1". It panics
// on an id that exists or a StatusID/ReferrerID that is not a decimal:
// both are mistakes of the calling test.
func (s *Server) AddOrder(o Order) Order {
	o = cloneOrder(o)
	now := s.nowSecond()
	if o.CreatedAt.IsZero() {
		o.CreatedAt = now
	}
	if o.UpdatedAt.IsZero() {
		o.UpdatedAt = now
	}
	o.CreatedAt = o.CreatedAt.Truncate(time.Second)
	o.UpdatedAt = o.UpdatedAt.Truncate(time.Second)
	if o.StatusID == "" {
		o.StatusID = "3"
	}
	if o.LockStatus == "" {
		o.LockStatus = LockUnlocked
	}
	if o.TypeID == 0 {
		o.TypeID = 1
	}
	if o.ReferrerID == "" {
		o.ReferrerID = "1"
	}
	if o.PlentyID == 0 {
		o.PlentyID = DefaultPlentyID
	}
	if o.LocationID == "" {
		o.LocationID = "1"
	}
	for _, f := range []struct {
		name string
		text *string
	}{{"StatusID", &o.StatusID}, {"ReferrerID", &o.ReferrerID}} {
		n, err := normalizeDecimalText(*f.text)
		if err != nil {
			panic(fmt.Sprintf("plentysim: AddOrder: %s %q is not a decimal", f.name, *f.text))
		}
		*f.text = n
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if o.ID == 0 {
		o.ID = s.nextID
	}
	if _, ok := s.index[o.ID]; ok {
		panic(fmt.Sprintf("plentysim: AddOrder: order %d exists", o.ID))
	}
	s.insertLocked(o)
	s.history = append(s.history, Change{OrderID: o.ID, At: o.UpdatedAt, Kind: KindCreated})
	return cloneOrder(o)
}

// insertLocked stores an order whose id is not taken, keeping the slice
// sorted by id.
func (s *Server) insertLocked(o Order) {
	s.version++
	s.nextID = max(s.nextID, o.ID+1)
	if n := len(s.orders); n == 0 || s.orders[n-1].ID < o.ID {
		s.orders = append(s.orders, o)
		s.index[o.ID] = n
		return
	}
	i, _ := slices.BinarySearchFunc(s.orders, o.ID, func(e Order, id int64) int { return cmp.Compare(e.ID, id) })
	s.orders = slices.Insert(s.orders, i, o)
	for j := i; j < len(s.orders); j++ {
		s.index[s.orders[j].ID] = j
	}
}

// Order returns a copy of the order with that id.
func (s *Server) Order(id int64) (Order, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.index[id]
	if !ok {
		return Order{}, false
	}
	return cloneOrder(s.orders[i]), true
}

// Orders returns deep copies of all orders, sorted by id.
func (s *Server) Orders() []Order {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Order, len(s.orders))
	for i, o := range s.orders {
		out[i] = cloneOrder(o)
	}
	return out
}

// History returns the mutation history in the order applied.
func (s *Server) History() []Change {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.history)
}

// SetStatus sets the status of an order (decimal text such as "5.1").
// updatedAt becomes now truncated to the second (never earlier than
// before); the Change is recorded.
func (s *Server) SetStatus(id int64, status string) (Order, error) {
	st, err := normalizeDecimalText(status)
	if err != nil {
		return Order{}, fmt.Errorf("plentysim: status %q: %w", status, err)
	}
	return s.mutate(id, func(o *Order) Change {
		from := o.StatusID
		o.StatusID = st
		return Change{Kind: KindStatus, From: from, To: st}
	})
}

// SetLock sets the lockStatus of an order ("unlocked", "permanentlyLocked",
// "reversibleLocked"; other non-empty texts are stored as given).
func (s *Server) SetLock(id int64, lock string) (Order, error) {
	if lock == "" {
		return Order{}, errors.New("plentysim: empty lock status")
	}
	return s.mutate(id, func(o *Order) Change {
		from := o.LockStatus
		o.LockStatus = lock
		return Change{Kind: KindLock, From: from, To: lock}
	})
}

// Touch advances the updatedAt of an order only.
func (s *Server) Touch(id int64) (Order, error) {
	return s.mutate(id, func(*Order) Change { return Change{Kind: KindTouch} })
}

func (s *Server) mutate(id int64, apply func(*Order) Change) (Order, error) {
	now := s.nowSecond()
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.index[id]
	if !ok {
		return Order{}, fmt.Errorf("order %d: %w", id, ErrNoOrder)
	}
	s.applyLocked(i, now, apply)
	return cloneOrder(s.orders[i]), nil
}

// applyLocked applies a mutation to s.orders[i], advances its updatedAt and
// records the Change.
func (s *Server) applyLocked(i int, now time.Time, apply func(*Order) Change) Change {
	s.version++
	o := &s.orders[i]
	ch := apply(o)
	if now.After(o.UpdatedAt) {
		o.UpdatedAt = now
	}
	ch.OrderID, ch.At = o.ID, o.UpdatedAt
	s.history = append(s.history, ch)
	return ch
}

// Generate adds n orders with createdAt = updatedAt spread over [from, to]
// (ids increase with time; several orders may share a second) and realistic
// field variety: decimal statuses and referrers, locks, null owners, items,
// variations, properties and relations, addresses, amounts and payments. The sequence is deterministic per
// Config.Seed. It records no history: it is the pre-existing state.
func (s *Server) Generate(n int, from, to time.Time) {
	if n <= 0 {
		return
	}
	if to.Before(from) {
		from, to = to, from
	}
	span := to.Sub(from)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.orders = slices.Grow(s.orders, n)
	prev := time.Time{}
	for i := range n {
		// One time slot per order, a random instant inside it: sorted, spread.
		slot := time.Duration(float64(span) * float64(i) / float64(n))
		jitter := time.Duration(s.genRNG.Float64() * float64(span) / float64(n))
		t := from.Add(slot + jitter).Truncate(time.Second)
		if t.Before(from) {
			t = from.Truncate(time.Second)
		}
		if t.Before(prev) {
			t = prev
		}
		prev = t
		o := randomOrder(s.genRNG, t)
		o.ID = s.nextID
		s.generateRelations(&o)
		s.insertLocked(o)
	}
}

// weighted picks one of values with the given integer weights.
func weighted[T any](rng *rand.Rand, values []T, weights []int) T {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := rng.IntN(total)
	for i, w := range weights {
		if n < w {
			return values[i]
		}
		n -= w
	}
	return values[len(values)-1]
}

var (
	genStatuses       = []string{"3", "4", "5", "5.1", "5.7", "6", "6.1", "7", "7.01", "8", "8.3", "9", "11.1"}
	genStatusWeights  = []int{10, 5, 22, 5, 2, 8, 2, 30, 3, 4, 1, 6, 2}
	genReferrers      = []string{"1", "0", "4.01", "2.08", "9", "102"}
	genReferrerWeight = []int{60, 15, 10, 5, 5, 5}
	genTypes          = []int64{1, 2, 3, 4, 5}
	genTypeWeights    = []int{80, 5, 8, 4, 3}
	genLocks          = []string{LockUnlocked, LockReversible, LockPermanent}
	genLockWeights    = []int{88, 7, 5}
	genPayments       = []string{"paid", "unpaid", "partlyPaid", "prepayment"}
)

// randomOrder returns an order with random fields, created and updated at t.
func randomOrder(rng *rand.Rand, t time.Time) Order {
	o := Order{
		ReferrerID: weighted(rng, genReferrers, genReferrerWeight),
		PlentyID:   DefaultPlentyID,
		TypeID:     weighted(rng, genTypes, genTypeWeights),
		LockStatus: weighted(rng, genLocks, genLockWeights),
		LocationID: strconv.Itoa(1 + rng.IntN(10)/8), // "1" mostly, some "2"
		CreatedAt:  t,
		UpdatedAt:  t,
		StatusID:   weighted(rng, genStatuses, genStatusWeights),
		Properties: map[int]string{
			3: strconv.Itoa(6000 + rng.IntN(5)),        // payment method
			4: genPayments[rng.IntN(len(genPayments))], // payment status
		},
		Relations: map[string]int64{"warehouse_sender": int64(1 + rng.IntN(2))},
	}
	if rng.IntN(100) < 80 {
		o.OwnerID = strconv.Itoa([]int{3, 12, 7}[rng.IntN(3)])
	}
	if rng.IntN(100) < 60 {
		o.Properties[7] = "EXT-" + strconv.Itoa(100000+rng.IntN(900000)) // external order id
	}
	if rng.IntN(100) < 90 {
		o.Relations["contact_receiver"] = int64(100 + rng.IntN(5000))
	}
	for range 1 + rng.IntN(4) {
		item := int64(100 + rng.IntN(900))
		o.ItemIDs = append(o.ItemIDs, item)
		o.VariationIDs = append(o.VariationIDs, item*10+int64(rng.IntN(5)))
	}
	return o
}

// MutatorConfig configures RunMutator. Zero fields take the defaults.
type MutatorConfig struct {
	Rate                                                float64      // mutations per second (default 1)
	StatusWeight, LockWeight, CreateWeight, TouchWeight float64      // defaults 6, 2, 2, 0 (all zero = defaults)
	Statuses                                            []string     // status texts to move between; default "3","4","5","5.1","6","7","7.01","8","9","11.1"
	OnChange                                            func(Change) // called after each mutation, outside the simulator's locks (optional)
}

var defaultMutatorStatuses = []string{"3", "4", "5", "5.1", "6", "7", "7.01", "8", "9", "11.1"}

// Validate reports a negative rate or weight and statuses that are not decimals.
func (c MutatorConfig) Validate() error {
	for _, v := range []float64{c.Rate, c.StatusWeight, c.LockWeight, c.CreateWeight, c.TouchWeight} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("mutator: rate or weight %v is not a finite non-negative number", v)
		}
	}
	for _, st := range c.Statuses {
		if _, err := parseDecimal(st); err != nil {
			return fmt.Errorf("mutator: status %q is not a decimal", st)
		}
	}
	return nil
}

// withDefaults applies the defaults; it panics when Validate fails (a
// mistake of the caller).
func (c MutatorConfig) withDefaults() MutatorConfig {
	if err := c.Validate(); err != nil {
		panic("plentysim: " + err.Error())
	}
	if !(c.Rate > 0) {
		c.Rate = 1
	}
	if !(c.StatusWeight > 0 || c.LockWeight > 0 || c.CreateWeight > 0 || c.TouchWeight > 0) {
		c.StatusWeight, c.LockWeight, c.CreateWeight, c.TouchWeight = 6, 2, 2, 0
	}
	if len(c.Statuses) == 0 {
		c.Statuses = defaultMutatorStatuses
	}
	statuses := make([]string, len(c.Statuses))
	for i, st := range c.Statuses {
		statuses[i], _ = normalizeDecimalText(st) // validated above
	}
	c.Statuses = statuses
	return c
}

// MutateRandom applies n random mutations now (weights and statuses of the
// default MutatorConfig) and returns them.
func (s *Server) MutateRandom(n int) []Change {
	cfg := MutatorConfig{}.withDefaults()
	changes := make([]Change, 0, max(n, 0))
	now := s.nowSecond()
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		changes = append(changes, s.mutateRandomLocked(cfg, now))
	}
	return changes
}

// RunMutator applies random mutations at cfg.Rate per second (time.Ticker)
// until ctx is done; it panics when cfg.Validate fails. The sequence of choices is deterministic per
// Config.Seed (it shares the RNG with MutateRandom).
func (s *Server) RunMutator(ctx context.Context, cfg MutatorConfig) {
	cfg = cfg.withDefaults()
	interval := max(time.Duration(float64(time.Second)/cfg.Rate), time.Microsecond)
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		now := s.nowSecond()
		s.mu.Lock()
		ch := s.mutateRandomLocked(cfg, now)
		s.mu.Unlock()
		if cfg.OnChange != nil {
			cfg.OnChange(ch)
		}
	}
}

// mutateRandomLocked applies one random mutation. Orders are picked mostly
// among the newest tenth, as on a real system recent orders change most.
func (s *Server) mutateRandomLocked(cfg MutatorConfig, now time.Time) Change {
	rng := s.mutRNG
	total := cfg.StatusWeight + cfg.LockWeight + cfg.CreateWeight + cfg.TouchWeight
	x := rng.Float64() * total
	kind := KindTouch
	switch {
	case x < cfg.StatusWeight:
		kind = KindStatus
	case x < cfg.StatusWeight+cfg.LockWeight:
		kind = KindLock
	case x < cfg.StatusWeight+cfg.LockWeight+cfg.CreateWeight:
		kind = KindCreated
	}
	if len(s.orders) == 0 {
		kind = KindCreated
	}
	if kind == KindCreated {
		o := randomOrder(rng, now)
		o.ID = s.nextID
		s.generateRelations(&o)
		s.insertLocked(o)
		ch := Change{OrderID: o.ID, At: o.UpdatedAt, Kind: KindCreated}
		s.history = append(s.history, ch)
		return ch
	}

	n := len(s.orders)
	i := rng.IntN(n)
	if recent := max(n/10, 1); rng.IntN(10) < 7 {
		i = n - 1 - rng.IntN(recent)
	}
	switch kind {
	case KindStatus:
		cur, _ := parseDecimal(s.orders[i].StatusID)
		var choices []string
		for _, st := range cfg.Statuses {
			if d, _ := parseDecimal(st); d.cmp(cur) != 0 {
				choices = append(choices, st)
			}
		}
		if len(choices) > 0 {
			to := choices[rng.IntN(len(choices))]
			return s.applyLocked(i, now, func(o *Order) Change {
				from := o.StatusID
				o.StatusID = to
				return Change{Kind: KindStatus, From: from, To: to}
			})
		}
	case KindLock:
		to := LockUnlocked
		if s.orders[i].LockStatus == LockUnlocked {
			to = weighted(rng, []string{LockReversible, LockPermanent}, []int{4, 1})
		}
		return s.applyLocked(i, now, func(o *Order) Change {
			from := o.LockStatus
			o.LockStatus = to
			return Change{Kind: KindLock, From: from, To: to}
		})
	}
	return s.applyLocked(i, now, func(*Order) Change { return Change{Kind: KindTouch} })
}
