package plentysim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrUnknownFilter is returned (wrapped) by ParseSimpleFilter for a name that
// is not a filter. The server ignores such parameters silently, as the real
// service does: a typo in a filter name widens the result to every order.
var ErrUnknownFilter = errors.New("unknown filter")

// fieldKind identifies the order field a filter applies to.
type fieldKind uint8

const (
	fieldOrderID fieldKind = iota + 1
	fieldTypeID
	fieldItem
	fieldVariation
	fieldRelation
	fieldStatus
	fieldReferrer
	fieldCreated
	fieldUpdated
	fieldProperty
)

// valueKind is the type of a filter's operands.
type valueKind uint8

const (
	valueInt valueKind = iota + 1
	valueDecimal
	valueTime
	valueString
)

func (f fieldKind) valueKind() valueKind {
	switch f {
	case fieldStatus, fieldReferrer:
		return valueDecimal
	case fieldCreated, fieldUpdated:
		return valueTime
	case fieldProperty:
		return valueString
	default:
		return valueInt
	}
}

func (v valueKind) String() string {
	switch v {
	case valueInt:
		return "integer"
	case valueDecimal:
		return "decimal"
	case valueTime:
		return "timestamp"
	default:
		return "string"
	}
}

var fixedFields = map[string]fieldKind{
	"orderId":         fieldOrderID,
	"orderTypeId":     fieldTypeID,
	"itemId":          fieldItem,
	"itemVariationId": fieldVariation,
	"statusId":        fieldStatus,
	"referrerId":      fieldReferrer,
	"createdAt":       fieldCreated,
	"updatedAt":       fieldUpdated,
}

const (
	propertyPrefix = "orderProperty_"
	relationPrefix = "relationReference_"
)

// lookupField resolves a filter name. For orderProperty_<typeId> it returns
// the property type id, for relationReference_<entity>_<role> the relation
// key "<entity>_<role>" (the key of Order.Relations).
func lookupField(name string) (kind fieldKind, prop int, rel string, ok bool) {
	if k, ok := fixedFields[name]; ok {
		return k, 0, "", true
	}
	if rest, found := strings.CutPrefix(name, propertyPrefix); found {
		if rest == "" || len(rest) > 9 || strings.Trim(rest, "0123456789") != "" {
			return 0, 0, "", false
		}
		n, err := strconv.Atoi(rest)
		if err != nil {
			return 0, 0, "", false
		}
		return fieldProperty, n, "", true
	}
	if rest, found := strings.CutPrefix(name, relationPrefix); found {
		entity, role, found := strings.Cut(rest, "_")
		if !found || entity == "" || role == "" {
			return 0, 0, "", false
		}
		return fieldRelation, 0, rest, true
	}
	return 0, 0, "", false
}

// op is a filter operator.
type op uint8

const (
	opEq op = iota + 1
	opNot
	opIn
	opNin
	opNull
	opNn
	opLt
	opLte
	opGt
	opGte
	opBetween
)

// opText is the name of each operator.
var opText = [...]string{
	opEq: "eq", opNot: "not", opIn: "in", opNin: "nin", opNull: "null", opNn: "nn",
	opLt: "lt", opLte: "lte", opGt: "gt", opGte: "gte", opBetween: "between",
}

var opNames = map[string]op{
	"eq": opEq, "not": opNot, "in": opIn, "nin": opNin, "null": opNull, "nn": opNn,
	"lt": opLt, "lte": opLte, "gt": opGt, "gte": opGte, "between": opBetween,
}

// simpleOps are the operators of query-string filters.
var simpleOps = map[string]bool{
	"eq": true, "in": true, "not": true, "lt": true, "lte": true, "gt": true, "gte": true, "between": true,
}

func (o op) isRange() bool { return o >= opLt }

// Condition is one parsed filter condition: a field, an operator and its
// operands. Field, Op and Values describe it; the parsed operands used for
// matching are kept unexported.
type Condition struct {
	Field  string   // filter name as given, e.g. "statusId", "orderProperty_4"
	Op     string   // eq, not, in, nin, null, nn, lt, lte, gt, gte or between
	Values []string // operands in canonical text (decimals and integers normalized, others as given)

	field fieldKind
	op    op
	prop  int
	rel   string
	ints  []int64
	decs  []decimal
	times []time.Time
}

// ParseSimpleFilter parses one query-string filter: name is the parameter
// name, raw its URL-decoded value ("5", "in:5,6.1", "between:a,b"). A plain
// value means eq. Unknown names yield an error wrapping ErrUnknownFilter;
// invalid operators, operands or arities yield an error naming the problem.
func ParseSimpleFilter(name, raw string) (Condition, error) {
	kind, prop, rel, ok := lookupField(name)
	if !ok {
		return Condition{}, fmt.Errorf("%w: %q", ErrUnknownFilter, name)
	}
	opName, val := "eq", raw
	if i := strings.IndexByte(raw, ':'); i > 0 && isOperatorWord(raw[:i]) {
		opName, val = raw[:i], raw[i+1:]
		if !simpleOps[opName] {
			return Condition{}, fmt.Errorf("filter %q: unknown operator %q (simple filters take eq, in, not, lt, lte, gt, gte, between)", name, opName)
		}
	}
	o := opNames[opName]
	var vals []string
	switch o {
	case opIn, opBetween:
		vals = strings.Split(val, ",")
	default:
		vals = []string{val}
	}
	return buildCondition(name, kind, prop, rel, o, vals)
}

// isOperatorWord reports whether the text before the first colon of a simple
// filter value is meant as an operator: 1 to 16 ASCII letters. A timestamp's
// "2026-11-22T10" is not, so plain timestamps still mean eq.
func isOperatorWord(s string) bool {
	if len(s) == 0 || len(s) > 16 {
		return false
	}
	for i := range len(s) {
		c := s[i] | 0x20
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

func buildCondition(name string, kind fieldKind, prop int, rel string, o op, vals []string) (Condition, error) {
	c := Condition{Field: name, Op: opText[o], field: kind, op: o, prop: prop, rel: rel}
	vk := kind.valueKind()
	if vk == valueString && o.isRange() {
		return Condition{}, fmt.Errorf("filter %q: operator %q is not applicable to a string filter (only eq, not, in, nin, null, nn)", name, c.Op)
	}
	want := -1
	switch o {
	case opEq, opNot, opLt, opLte, opGt, opGte:
		want = 1
	case opBetween:
		want = 2
	case opNull, opNn:
		want = 0
	}
	if want >= 0 && len(vals) != want {
		return Condition{}, fmt.Errorf("filter %q: operator %q takes exactly %d value(s), got %d", name, c.Op, want, len(vals))
	}
	c.Values = make([]string, len(vals))
	for i, v := range vals {
		switch vk {
		case valueInt:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return Condition{}, fmt.Errorf("filter %q: invalid integer %q", name, v)
			}
			c.ints = append(c.ints, n)
			c.Values[i] = strconv.FormatInt(n, 10)
		case valueDecimal:
			d, err := parseDecimal(v)
			if err != nil {
				return Condition{}, fmt.Errorf("filter %q: invalid decimal %q", name, v)
			}
			c.decs = append(c.decs, d)
			c.Values[i] = d.String()
		case valueTime:
			t, err := parseTimestamp(v)
			if err != nil {
				return Condition{}, fmt.Errorf("filter %q: invalid timestamp %q: RFC 3339 with UTC offset expected (an unencoded \"+\" arrives as a space)", name, v)
			}
			c.times = append(c.times, t)
			c.Values[i] = v
		default:
			c.Values[i] = v
		}
	}
	return c, nil
}

// parseTimestamp parses RFC 3339 with a UTC offset (fractional seconds allowed).
func parseTimestamp(s string) (time.Time, error) {
	return time.Parse(time.RFC3339, s)
}

// Query returns the condition in simple-filter form ("in:5,6.1"), which
// ParseSimpleFilter(c.Field, c.Query()) parses back to the same condition for
// the operators of simple filters.
func (c Condition) Query() string {
	return c.Op + ":" + strings.Join(c.Values, ",")
}

// String returns "field=op:values", for messages.
func (c Condition) String() string { return c.Field + "=" + c.Query() }

// MarshalJSON returns the condition as a field of a complex filter:
// {"field":...,"operator":...,"value":...}, with integers and decimals as JSON
// numbers, timestamps and strings as JSON strings, arrays for in, nin and
// between, null for null and nn.
func (c Condition) MarshalJSON() ([]byte, error) {
	b := []byte(`{"field":`)
	b = appendJSONString(b, c.Field)
	b = append(b, `,"operator":`...)
	b = appendJSONString(b, c.Op)
	b = append(b, `,"value":`...)
	switch c.op {
	case opNull, opNn:
		b = append(b, "null"...)
	case opIn, opNin, opBetween:
		b = append(b, '[')
		for i, v := range c.Values {
			if i > 0 {
				b = append(b, ',')
			}
			b = c.appendOperand(b, v)
		}
		b = append(b, ']')
	default:
		b = c.appendOperand(b, c.Values[0])
	}
	return append(b, '}'), nil
}

func (c Condition) appendOperand(b []byte, v string) []byte {
	switch c.field.valueKind() {
	case valueInt, valueDecimal:
		return append(b, v...)
	default:
		return appendJSONString(b, v)
	}
}

// Match reports whether the order satisfies the condition.
func (c Condition) Match(o Order) bool { return c.match(&o) }

func (c *Condition) match(o *Order) bool {
	switch c.field {
	case fieldOrderID:
		return c.matchInt(o.ID, true)
	case fieldTypeID:
		return c.matchInt(o.TypeID, true)
	case fieldItem:
		return c.matchInts(o.ItemIDs)
	case fieldVariation:
		return c.matchInts(o.VariationIDs)
	case fieldRelation:
		v, ok := o.Relations[c.rel]
		return c.matchInt(v, ok)
	case fieldStatus:
		return c.matchDecimal(o.StatusID)
	case fieldReferrer:
		return c.matchDecimal(o.ReferrerID)
	case fieldCreated:
		return c.matchTime(o.CreatedAt)
	case fieldUpdated:
		return c.matchTime(o.UpdatedAt)
	case fieldProperty:
		v, ok := o.Properties[c.prop]
		if c.op == opNull || c.op == opNn {
			return (c.op == opNull) == (!ok || v == "")
		}
		if !ok {
			return c.op == opNot || c.op == opNin
		}
		return eval(c.op, len(c.Values), func(i int) int { return strings.Compare(v, c.Values[i]) })
	}
	return true
}

// presence handles null, nn and operators on an absent value. It returns
// done=true with the result when the operands need not be looked at.
func (c *Condition) presence(present bool) (result, done bool) {
	switch {
	case c.op == opNull:
		return !present, true
	case c.op == opNn:
		return present, true
	case !present:
		// Nothing is equal to, in or within range of an absent value.
		return c.op == opNot || c.op == opNin, true
	}
	return false, false
}

func (c *Condition) matchInt(v int64, present bool) bool {
	if r, done := c.presence(present); done {
		return r
	}
	return eval(c.op, len(c.ints), func(i int) int { return cmp.Compare(v, c.ints[i]) })
}

// matchInts matches a multi-valued field (the items of an order): a positive
// operator matches when any value satisfies it, not and nin match when no
// value is equal to (in) the operand(s).
func (c *Condition) matchInts(vs []int64) bool {
	if r, done := c.presence(len(vs) > 0); done {
		return r
	}
	positive := c.op
	switch c.op {
	case opNot:
		positive = opEq
	case opNin:
		positive = opIn
	}
	any := false
	for _, v := range vs {
		if eval(positive, len(c.ints), func(i int) int { return cmp.Compare(v, c.ints[i]) }) {
			any = true
			break
		}
	}
	if positive != c.op {
		return !any
	}
	return any
}

func (c *Condition) matchDecimal(text string) bool {
	d, err := parseDecimal(text)
	if r, done := c.presence(err == nil); done {
		return r
	}
	return eval(c.op, len(c.decs), func(i int) int { return d.cmp(c.decs[i]) })
}

func (c *Condition) matchTime(t time.Time) bool {
	if r, done := c.presence(!isNullTime(t)); done {
		return r
	}
	return eval(c.op, len(c.times), func(i int) int { return t.Compare(c.times[i]) })
}

// isNullTime reports whether a timestamp counts as absent: the zero time or
// the PHP zero date (year -1 or 0).
func isNullTime(t time.Time) bool { return t.IsZero() || t.Year() <= 0 }

// eval applies a comparison operator; cmp(i) compares the field value with
// operand i.
func eval(o op, n int, cmp func(i int) int) bool {
	switch o {
	case opEq:
		return cmp(0) == 0
	case opNot:
		return cmp(0) != 0
	case opIn, opNin:
		found := false
		for i := range n {
			if cmp(i) == 0 {
				found = true
				break
			}
		}
		return found == (o == opIn)
	case opLt:
		return cmp(0) < 0
	case opLte:
		return cmp(0) <= 0
	case opGt:
		return cmp(0) > 0
	case opGte:
		return cmp(0) >= 0
	case opBetween:
		return cmp(0) >= 0 && cmp(1) <= 0
	}
	return false
}

// Group is a parsed complex filter: conditions and nested groups combined
// with "and" or "or". A group without conditions matches every order.
type Group struct {
	ConditionType string // "and" or "or"
	Fields        []Condition
	Groups        []Group
	Ignored       []string // names of unknown filter fields, dropped as the real service does
}

// maxGroupDepth bounds the nesting of complex filter groups.
const maxGroupDepth = 32

type wireGroup struct {
	ConditionType *string           `json:"conditionType"`
	Fields        []wireCondition   `json:"fields"`
	Groups        []json.RawMessage `json:"groups"`
}

type wireCondition struct {
	Field    string          `json:"field"`
	Operator string          `json:"operator"`
	Value    json.RawMessage `json:"value"`
}

// ParseComplexFilter parses the JSON group body of POST /rest/orders/search:
// {"conditionType":"and"|"or","fields":[{"field","operator","value"}],"groups":[...]}.
// An empty body or null is an empty "and" group. Fields with unknown names are
// dropped and listed in Group.Ignored; anything else that is wrong is an error
// naming the problem.
func ParseComplexFilter(body []byte) (*Group, error) {
	g, err := parseGroup(body, 0)
	if err != nil {
		return nil, fmt.Errorf("complex filter: %w", err)
	}
	return &g, nil
}

func parseGroup(raw []byte, depth int) (Group, error) {
	if depth >= maxGroupDepth {
		return Group{}, fmt.Errorf("groups nested deeper than %d", maxGroupDepth)
	}
	g := Group{ConditionType: "and"}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return g, nil
	}
	if raw[0] != '{' {
		return Group{}, errors.New("a group must be a JSON object")
	}
	var w wireGroup
	if err := json.Unmarshal(raw, &w); err != nil {
		return Group{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if w.ConditionType != nil {
		switch ct := strings.ToLower(*w.ConditionType); ct {
		case "and", "or":
			g.ConditionType = ct
		default:
			return Group{}, fmt.Errorf("conditionType %q: want \"and\" or \"or\"", *w.ConditionType)
		}
	}
	for _, wc := range w.Fields {
		kind, prop, rel, ok := lookupField(wc.Field)
		if !ok {
			g.Ignored = append(g.Ignored, wc.Field)
			continue
		}
		o, ok := opNames[wc.Operator]
		if !ok {
			return Group{}, fmt.Errorf("filter %q: unknown operator %q", wc.Field, wc.Operator)
		}
		vals, err := complexOperands(wc, o, kind.valueKind())
		if err != nil {
			return Group{}, err
		}
		c, err := buildCondition(wc.Field, kind, prop, rel, o, vals)
		if err != nil {
			return Group{}, err
		}
		g.Fields = append(g.Fields, c)
	}
	for _, raw := range w.Groups {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' {
			return Group{}, errors.New("an entry of groups must be a JSON object")
		}
		sub, err := parseGroup(raw, depth+1)
		if err != nil {
			return Group{}, err
		}
		g.Groups = append(g.Groups, sub)
	}
	return g, nil
}

// complexOperands turns the JSON value of a complex condition into operand
// texts: null for null and nn, an array for in, nin and between, a single
// string or number otherwise.
func complexOperands(wc wireCondition, o op, vk valueKind) ([]string, error) {
	v := bytes.TrimSpace(wc.Value)
	switch o {
	case opNull, opNn:
		if len(v) != 0 && string(v) != "null" {
			return nil, fmt.Errorf("filter %q: operator %q takes the value null", wc.Field, wc.Operator)
		}
		return nil, nil
	case opIn, opNin, opBetween:
		if len(v) == 0 || v[0] != '[' {
			return nil, fmt.Errorf("filter %q: operator %q takes an array", wc.Field, wc.Operator)
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(v, &elems); err != nil {
			return nil, fmt.Errorf("filter %q: %w", wc.Field, err)
		}
		vals := make([]string, 0, len(elems))
		for _, e := range elems {
			s, err := scalarText(wc.Field, e, vk)
			if err != nil {
				return nil, err
			}
			vals = append(vals, s)
		}
		return vals, nil
	default:
		s, err := scalarText(wc.Field, v, vk)
		if err != nil {
			return nil, err
		}
		return []string{s}, nil
	}
}

// scalarText returns the text of a JSON string or number. Timestamps must be
// strings; numbers and numeric strings are both accepted for the other kinds.
func scalarText(field string, raw json.RawMessage, vk valueKind) (string, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) > 0 && raw[0] == '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("filter %q: %w", field, err)
		}
		return s, nil
	case len(raw) > 0 && (raw[0] == '-' || isDigit(raw[0])) && vk != valueTime:
		return string(raw), nil
	case len(raw) == 0:
		return "", fmt.Errorf("filter %q: value missing", field)
	default:
		return "", fmt.Errorf("filter %q: value %s is not a %s", field, truncateBytes(raw, 40), vk)
	}
}

func truncateBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// MarshalJSON returns the canonical JSON of the group, which
// ParseComplexFilter parses back to the same group (without Ignored).
func (g Group) MarshalJSON() ([]byte, error) {
	return g.appendJSON(nil), nil
}

func (g Group) appendJSON(b []byte) []byte {
	ct := g.ConditionType
	if ct == "" {
		ct = "and"
	}
	b = append(b, `{"conditionType":`...)
	b = appendJSONString(b, ct)
	b = append(b, `,"fields":[`...)
	for i, c := range g.Fields {
		if i > 0 {
			b = append(b, ',')
		}
		cj, _ := c.MarshalJSON()
		b = append(b, cj...)
	}
	b = append(b, `],"groups":[`...)
	for i, sub := range g.Groups {
		if i > 0 {
			b = append(b, ',')
		}
		b = sub.appendJSON(b)
	}
	return append(b, "]}"...)
}

// Match reports whether the order satisfies the group.
func (g *Group) Match(o Order) bool { return g.match(&o) }

func (g *Group) match(o *Order) bool {
	if len(g.Fields) == 0 && len(g.Groups) == 0 {
		return true
	}
	or := g.ConditionType == "or"
	for i := range g.Fields {
		if g.Fields[i].match(o) == or {
			return or
		}
	}
	for i := range g.Groups {
		if g.Groups[i].match(o) == or {
			return or
		}
	}
	return !or
}
