package diff

import (
	"cmp"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// The scope (WATCHER_SCOPE, WATCHER_SCOPE_JSON) narrows what orderwatch
// watches. A filter the service applies drops an order from every search as
// soon as the order no longer matches: when the filtered field can change
// (statusId 5 -> 7 under statusId=in:5,6), the order's leaving would never be
// seen, and the snapshot and every subscriber would keep it at 5 forever. So
// a scope is split: filters on fields that never change over an order's life
// go to the service (fewer orders to read), everything else is evaluated by
// orderwatch on the before and after states of each change (Decide publishes
// a change when either side is in scope).

// ScopeClass says how orderwatch treats a scope filter on a field.
type ScopeClass int

// Scope classes.
const (
	// ScopeRefused: the filter cannot be honoured: the field may change and
	// an entry does not carry it, or orderwatch does not know the name.
	ScopeRefused ScopeClass = iota
	// ScopeSent: the field never changes and the spec lists the filter: the
	// service applies it (in an "or" group mixed with local fields the
	// whole group is evaluated locally instead).
	ScopeSent
	// ScopeLocal: orderwatch evaluates the filter on before and after.
	ScopeLocal
)

// scopeKind is how the local evaluator reads a field of State.
type scopeKind int

const (
	kindDecimal scopeKind = iota + 1
	kindInt
	kindString
	kindTime
)

// scopeField is what orderwatch knows of one scope filter name.
type scopeField struct {
	kind  scopeKind
	fixed bool // never changes over an order's life
	sent  bool // fixed and listed by the spec: the service may apply it
	why   string
	get   func(id int64, s *State) (dec order.Decimal, n int64, text string, at order.Time)
}

// scopeFields are the filter names a scope may use. Fixed: the order id, its
// type, its client (plentyId), its referrer (the channel it came from) and
// when it was created. Everything the spec does not show to be fixed counts
// as changing (statusId, lockStatus, ownerId, locationId). plentyId and
// orderId are fixed, but the spec does not list them as filters (the service
// ignores unknown names silently), so they are evaluated locally too.
var scopeFields = map[string]scopeField{
	"statusId": {kind: kindDecimal, why: "changes over an order's life",
		get: func(_ int64, s *State) (order.Decimal, int64, string, order.Time) {
			return s.StatusID, 0, "", order.Time{}
		}},
	"lockStatus": {kind: kindString, why: "changes over an order's life",
		get: func(_ int64, s *State) (order.Decimal, int64, string, order.Time) {
			return order.Decimal{}, 0, s.LockStatus, order.Time{}
		}},
	"ownerId": {kind: kindString, why: "changes over an order's life",
		get: func(_ int64, s *State) (order.Decimal, int64, string, order.Time) {
			return order.Decimal{}, 0, string(s.OwnerID), order.Time{}
		}},
	"locationId": {kind: kindString, why: "the spec does not show it to be fixed",
		get: func(_ int64, s *State) (order.Decimal, int64, string, order.Time) {
			return order.Decimal{}, 0, string(s.LocationID), order.Time{}
		}},
	"orderTypeId": {kind: kindInt, fixed: true, sent: true, why: "never changes",
		get: func(_ int64, s *State) (order.Decimal, int64, string, order.Time) {
			return order.Decimal{}, s.TypeID, "", order.Time{}
		}},
	"referrerId": {kind: kindDecimal, fixed: true, sent: true, why: "never changes",
		get: func(_ int64, s *State) (order.Decimal, int64, string, order.Time) {
			return s.ReferrerID, 0, "", order.Time{}
		}},
	"createdAt": {kind: kindTime, fixed: true, sent: true, why: "never changes",
		get: func(_ int64, s *State) (order.Decimal, int64, string, order.Time) {
			return order.Decimal{}, 0, "", s.CreatedAt
		}},
	"plentyId": {kind: kindInt, fixed: true, why: "never changes, but the spec does not list the filter",
		get: func(_ int64, s *State) (order.Decimal, int64, string, order.Time) {
			return order.Decimal{}, s.PlentyID, "", order.Time{}
		}},
	"orderId": {kind: kindInt, fixed: true, why: "never changes, but the spec does not list the filter (and keyset paging uses it)",
		get: func(id int64, _ *State) (order.Decimal, int64, string, order.Time) {
			return order.Decimal{}, id, "", order.Time{}
		}},
}

// ClassifyScopeField says how a scope filter on name is treated and why.
func ClassifyScopeField(name string) (ScopeClass, string) {
	if f, ok := scopeFields[name]; ok {
		if f.sent {
			return ScopeSent, f.why
		}
		return ScopeLocal, f.why
	}
	switch {
	case name == "updatedAt":
		return ScopeRefused, "the sweep sets updatedAt itself"
	case name == "itemId" || name == "itemVariationId" ||
		strings.HasPrefix(name, "orderProperty_") || strings.HasPrefix(name, "relationReference_"):
		return ScopeRefused, "it can change over an order's life and an order entry does not carry it, so an order leaving the scope would go unseen"
	}
	return ScopeRefused, "orderwatch does not know this filter: it cannot evaluate it, and the service ignores unknown names silently (a typo widens the scope to every order)"
}

// ScopeFieldNames returns the names a scope may use, sorted, by class.
func ScopeFieldNames(c ScopeClass) []string {
	var out []string
	for name := range scopeFields {
		if cl, _ := ClassifyScopeField(name); cl == c {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Scope is the part of the scope orderwatch evaluates itself: conditions
// combined with and/or, nested like a complex filter. A nil *Scope holds
// every order.
type Scope struct {
	or     bool
	conds  []scopeCond
	groups []*Scope
}

type scopeCond struct {
	f     order.Filter
	field scopeField
	decs  []order.Decimal
	ints  []int64
	texts []string
	times []order.Time
}

// Match reports whether the order with id and state s is in the scope.
func (sc *Scope) Match(id int64, s *State) bool {
	if sc == nil {
		return true
	}
	for i := range sc.conds {
		if sc.conds[i].match(id, s) == sc.or {
			return sc.or
		}
	}
	for _, g := range sc.groups {
		if g.Match(id, s) == sc.or {
			return sc.or
		}
	}
	return !sc.or
}

// String renders the scope for people: "statusId=in:5,6 and (a or b)".
func (sc *Scope) String() string {
	if sc == nil {
		return ""
	}
	parts := make([]string, 0, len(sc.conds)+len(sc.groups))
	for _, c := range sc.conds {
		parts = append(parts, FilterString(c.f))
	}
	for _, g := range sc.groups {
		parts = append(parts, "("+g.String()+")")
	}
	sep := " and "
	if sc.or {
		sep = " or "
	}
	return strings.Join(parts, sep)
}

// FilterString renders a filter in query form: "statusId=in:5,6".
func FilterString(f order.Filter) string {
	texts := make([]string, len(f.Values))
	for i, v := range f.Values {
		texts[i] = v.String()
	}
	return f.Field + "=" + string(f.Op) + ":" + strings.Join(texts, ",")
}

func newCond(f order.Filter) (scopeCond, error) {
	field, ok := scopeFields[f.Field]
	if !ok {
		_, why := ClassifyScopeField(f.Field)
		return scopeCond{}, fmt.Errorf("scope filter %s: %s", f.Field, why)
	}
	c := scopeCond{f: f, field: field}
	if field.kind == kindString && (f.Op == order.OpLt || f.Op == order.OpLte || f.Op == order.OpGt || f.Op == order.OpGte || f.Op == order.OpBetween) {
		return scopeCond{}, fmt.Errorf("scope filter %s: no range operator (%s) on a text field", f.Field, f.Op)
	}
	for _, v := range f.Values {
		text := v.String()
		switch field.kind {
		case kindDecimal:
			d, err := order.ParseDecimal(text)
			if err != nil || d.IsZero() {
				return scopeCond{}, fmt.Errorf("scope filter %s: value %q is not a decimal", f.Field, text)
			}
			c.decs = append(c.decs, d)
		case kindInt:
			n, err := strconv.ParseInt(text, 10, 64)
			if err != nil {
				return scopeCond{}, fmt.Errorf("scope filter %s: value %q is not an integer", f.Field, text)
			}
			c.ints = append(c.ints, n)
		case kindTime:
			t, err := order.ParseTime(text)
			if err != nil || t.IsZero() {
				return scopeCond{}, fmt.Errorf("scope filter %s: value %q is not an RFC 3339 timestamp with offset", f.Field, text)
			}
			c.times = append(c.times, t)
		default:
			c.texts = append(c.texts, text)
		}
	}
	return c, nil
}

// match applies the operator as the service does: null and nn test presence;
// nothing is equal to, in or within range of an absent value, so not and nin
// hold for it and the others do not.
func (c *scopeCond) match(id int64, s *State) bool {
	dec, n, text, at := c.field.get(id, s)
	var present bool
	var compare func(i int) int
	switch c.field.kind {
	case kindDecimal:
		present = !dec.IsZero()
		compare = func(i int) int { return dec.Cmp(c.decs[i]) }
	case kindInt:
		present = n != 0
		compare = func(i int) int { return cmp.Compare(n, c.ints[i]) }
	case kindTime:
		present = !at.IsZero()
		compare = func(i int) int { return at.Compare(c.times[i].Time) }
	default:
		present = text != ""
		compare = func(i int) int { return strings.Compare(text, c.texts[i]) }
	}
	switch {
	case c.f.Op == order.OpNull:
		return !present
	case c.f.Op == order.OpNn:
		return present
	case !present:
		return c.f.Op == order.OpNot || c.f.Op == order.OpNin
	}
	switch c.f.Op {
	case order.OpEq:
		return compare(0) == 0
	case order.OpNot:
		return compare(0) != 0
	case order.OpIn, order.OpNin:
		found := false
		for i := range c.f.Values {
			if compare(i) == 0 {
				found = true
				break
			}
		}
		return found == (c.f.Op == order.OpIn)
	case order.OpLt:
		return compare(0) < 0
	case order.OpLte:
		return compare(0) <= 0
	case order.OpGt:
		return compare(0) > 0
	case order.OpGte:
		return compare(0) >= 0
	case order.OpBetween:
		return compare(0) >= 0 && compare(1) <= 0
	}
	return false
}

// ScopeSplit is a scope divided between the service and orderwatch. The
// order is in scope when it matches all three parts.
type ScopeSplit struct {
	Sent      []order.Filter // simple filters sent with every search (query string)
	SentGroup *order.Group   // complex filter sent with every search (POST); nil: none
	Local     *Scope         // evaluated on before and after; nil: none
}

// SplitScope divides the simple filters (all of which must hold) and the
// complex group of a scope. A simple filter or a condition of an "and" group
// goes to the service when its field never changes (ScopeSent) and is
// evaluated locally otherwise. A nested group goes to the service only when
// every condition in it may; a group that mixes fixed and changing fields
// under "or" is evaluated locally as a whole (sending its fixed part would
// drop orders the changing part admits). A filter orderwatch can neither
// send safely nor evaluate is an error naming it.
func SplitScope(simple []order.Filter, group *order.Group) (ScopeSplit, error) {
	var sp ScopeSplit
	local := &Scope{}
	for _, f := range simple {
		cl, why := ClassifyScopeField(f.Field)
		switch cl {
		case ScopeRefused:
			return ScopeSplit{}, fmt.Errorf("scope filter %s: %s", f.Field, why)
		case ScopeSent:
			sp.Sent = append(sp.Sent, f)
		default:
			c, err := newCond(f)
			if err != nil {
				return ScopeSplit{}, err
			}
			local.conds = append(local.conds, c)
		}
	}
	if group != nil {
		sent, loc, err := splitGroup(group, 0)
		if err != nil {
			return ScopeSplit{}, err
		}
		sp.SentGroup = sent
		if loc != nil {
			if loc.or {
				local.groups = append(local.groups, loc)
			} else {
				local.conds = append(local.conds, loc.conds...)
				local.groups = append(local.groups, loc.groups...)
			}
		}
	}
	if len(local.conds) > 0 || len(local.groups) > 0 {
		if len(local.conds) == 0 && len(local.groups) == 1 {
			local = local.groups[0]
		}
		sp.Local = local
	}
	return sp, nil
}

// maxScopeDepth bounds the nesting of a scope group (order.ParseGroup
// bounds it already; this keeps splitGroup safe on any input).
const maxScopeDepth = 32

// splitGroup splits g into the part the service may apply and the part
// evaluated locally; either may be nil.
func splitGroup(g *order.Group, depth int) (sent *order.Group, local *Scope, err error) {
	if depth > maxScopeDepth {
		return nil, nil, fmt.Errorf("scope groups nested deeper than %d", maxScopeDepth)
	}
	allSent, err := checkGroup(g, depth)
	if err != nil {
		return nil, nil, err
	}
	if allSent {
		return g, nil, nil
	}
	if g.Or {
		local, err := localGroup(g, depth)
		return nil, local, err
	}
	sent = &order.Group{}
	local = &Scope{}
	for _, f := range g.Fields {
		if cl, _ := ClassifyScopeField(f.Field); cl == ScopeSent {
			sent.Fields = append(sent.Fields, f)
			continue
		}
		c, err := newCond(f)
		if err != nil {
			return nil, nil, err
		}
		local.conds = append(local.conds, c)
	}
	for _, sub := range g.Groups {
		s, l, err := splitGroup(sub, depth+1)
		if err != nil {
			return nil, nil, err
		}
		if s != nil {
			sent.Groups = append(sent.Groups, s)
		}
		if l != nil {
			local.groups = append(local.groups, l)
		}
	}
	if len(sent.Fields) == 0 && len(sent.Groups) == 0 {
		sent = nil
	}
	if len(local.conds) == 0 && len(local.groups) == 0 {
		local = nil
	}
	return sent, local, nil
}

// checkGroup reports whether every condition of g may go to the service,
// and refuses a condition orderwatch cannot honour.
func checkGroup(g *order.Group, depth int) (allSent bool, err error) {
	if depth > maxScopeDepth {
		return false, fmt.Errorf("scope groups nested deeper than %d", maxScopeDepth)
	}
	allSent = true
	for _, f := range g.Fields {
		cl, why := ClassifyScopeField(f.Field)
		if cl == ScopeRefused {
			return false, fmt.Errorf("scope filter %s: %s", f.Field, why)
		}
		allSent = allSent && cl == ScopeSent
	}
	for _, sub := range g.Groups {
		if sub == nil {
			return false, fmt.Errorf("scope: nil filter group")
		}
		s, err := checkGroup(sub, depth+1)
		if err != nil {
			return false, err
		}
		allSent = allSent && s
	}
	return allSent, nil
}

// localGroup compiles the whole of g for local evaluation.
func localGroup(g *order.Group, depth int) (*Scope, error) {
	if depth > maxScopeDepth {
		return nil, fmt.Errorf("scope groups nested deeper than %d", maxScopeDepth)
	}
	sc := &Scope{or: g.Or}
	for _, f := range g.Fields {
		c, err := newCond(f)
		if err != nil {
			return nil, err
		}
		sc.conds = append(sc.conds, c)
	}
	for _, sub := range g.Groups {
		l, err := localGroup(sub, depth+1)
		if err != nil {
			return nil, err
		}
		sc.groups = append(sc.groups, l)
	}
	return sc, nil
}
