package order

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Op is a filter operator of order search.
type Op string

// The operators of the spec's two tables. OpNin, OpNull and OpNn exist only
// in complex (JSON body) filters.
const (
	OpEq      Op = "eq"
	OpNot     Op = "not"
	OpIn      Op = "in"
	OpNin     Op = "nin"
	OpNull    Op = "null"
	OpNn      Op = "nn"
	OpLt      Op = "lt"
	OpLte     Op = "lte"
	OpGt      Op = "gt"
	OpGte     Op = "gte"
	OpBetween Op = "between"
)

// arity returns how many values op takes: exactly n, or at least n when many.
func (op Op) arity() (n int, many bool, ok bool) {
	switch op {
	case OpEq, OpNot, OpLt, OpLte, OpGt, OpGte:
		return 1, false, true
	case OpIn, OpNin:
		return 1, true, true
	case OpBetween:
		return 2, false, true
	case OpNull, OpNn:
		return 0, false, true
	}
	return 0, false, false
}

func (op Op) complexOnly() bool { return op == OpNin || op == OpNull || op == OpNn }

func (op Op) isRange() bool {
	return op == OpLt || op == OpLte || op == OpGt || op == OpGte || op == OpBetween
}

// Kind is the type of a filter field's values.
type Kind int

// Field kinds.
const (
	KindUnknown Kind = iota // a field this client does not know: any value, any operator
	KindInt
	KindDecimal
	KindTime
	KindString
)

func (k Kind) String() string {
	return [...]string{"unknown", "integer", "decimal", "timestamp", "string"}[k]
}

// fieldKinds are the filter names known from the spec and, marked, from real systems.
// updatedAt (the sweep's window) and orderId (keyset paging) are not in the
// spec's list but are accepted by real systems.
var fieldKinds = map[string]struct {
	kind   Kind
	inSpec bool
}{
	"orderTypeId":     {KindInt, true},
	"statusId":        {KindDecimal, true},
	"referrerId":      {KindDecimal, true},
	"createdAt":       {KindTime, true},
	"itemId":          {KindInt, true},
	"itemVariationId": {KindInt, true},
	"updatedAt":       {KindTime, false},
	"orderId":         {KindInt, false},
}

// FieldKind returns the kind of a filter field and whether the spec lists
// the name (watcher check warns about names it does not: the service
// ignores unknown filter names silently, so a typo widens the result).
func FieldKind(name string) (kind Kind, inSpec bool) {
	if f, ok := fieldKinds[name]; ok {
		return f.kind, f.inSpec
	}
	if rest, ok := strings.CutPrefix(name, "orderProperty_"); ok && isDigits(rest) {
		return KindString, true
	}
	if rest, ok := strings.CutPrefix(name, "relationReference_"); ok {
		if entity, role, ok := strings.Cut(rest, "_"); ok && isWord(entity) && isWord(role) {
			return KindInt, true
		}
	}
	return KindUnknown, false
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// Value is one filter value: its text and its JSON kind.
type Value struct {
	text   string
	kind   Kind // KindString: a JSON string in a complex body; otherwise a JSON number or timestamp string
	number bool // written as a JSON number in complex bodies
}

// Int is an integer value.
func Int(n int64) Value { return Value{text: strconv.FormatInt(n, 10), kind: KindInt, number: true} }

// Dec is a decimal value (a status, a referrer).
func Dec(d Decimal) Value { return Value{text: d.Canonical(), kind: KindDecimal, number: true} }

// Str is a string value.
func Str(s string) Value { return Value{text: s, kind: KindString} }

// At is a timestamp value, sent as RFC 3339 with the time's numeric offset
// (UTC as +00:00, never Z), in whole seconds (the service's resolution; the
// fraction is cut, not rounded).
func At(t time.Time) Value { return Value{text: t.Format(timeLayoutNumeric), kind: KindTime} }

const timeLayoutNumeric = "2006-01-02T15:04:05-07:00"

// String returns the value's text as sent.
func (v Value) String() string { return v.text }

// MarshalJSON writes numbers as JSON numbers and the rest as strings.
func (v Value) MarshalJSON() ([]byte, error) {
	if v.number {
		return []byte(v.text), nil
	}
	return json.Marshal(v.text)
}

// Filter is one condition: a field, an operator and its values.
type Filter struct {
	Field  string
	Op     Op
	Values []Value
}

// Condition is a Filter or a *Group.
type Condition interface{ isCondition() }

func (Filter) isCondition() {}
func (*Group) isCondition() {}

// F builds a filter with any operator; the helpers below read better.
func F(field string, op Op, values ...Value) Filter {
	return Filter{Field: field, Op: op, Values: values}
}

// Eq, Not, Lt, Lte, Gt, Gte, In, Nin, Between, Null and NotNull build filters.
func Eq(field string, v Value) Filter         { return F(field, OpEq, v) }
func Not(field string, v Value) Filter        { return F(field, OpNot, v) }
func Lt(field string, v Value) Filter         { return F(field, OpLt, v) }
func Lte(field string, v Value) Filter        { return F(field, OpLte, v) }
func Gt(field string, v Value) Filter         { return F(field, OpGt, v) }
func Gte(field string, v Value) Filter        { return F(field, OpGte, v) }
func In(field string, vs ...Value) Filter     { return F(field, OpIn, vs...) }
func Nin(field string, vs ...Value) Filter    { return F(field, OpNin, vs...) }
func Between(field string, a, b Value) Filter { return F(field, OpBetween, a, b) }
func Null(field string) Filter                { return F(field, OpNull) }
func NotNull(field string) Filter             { return F(field, OpNn) }

// Validate checks the filter against the operator tables of the spec; simple
// says whether it is to be sent in the query string.
func (f Filter) Validate(simple bool) error {
	if !isFieldName(f.Field) {
		return fmt.Errorf("filter field %q: want letters, digits and _", f.Field)
	}
	n, many, ok := f.Op.arity()
	if !ok {
		return fmt.Errorf("filter %s: unknown operator %q", f.Field, f.Op)
	}
	if simple && f.Op.complexOnly() {
		return fmt.Errorf("filter %s: operator %s exists only in complex filters (POST body)", f.Field, f.Op)
	}
	switch {
	case many && len(f.Values) < n:
		return fmt.Errorf("filter %s: %s needs a list of at least one value", f.Field, f.Op)
	case !many && len(f.Values) != n:
		return fmt.Errorf("filter %s: %s takes %d value(s), got %d", f.Field, f.Op, n, len(f.Values))
	}
	kind, _ := FieldKind(f.Field)
	if kind == KindString && f.Op.isRange() {
		return fmt.Errorf("filter %s: no range operator (%s) on a string filter", f.Field, f.Op)
	}
	for _, v := range f.Values {
		if err := checkValue(kind, v); err != nil {
			return fmt.Errorf("filter %s: %w", f.Field, err)
		}
		if simple && len(f.Values) > 1 && strings.Contains(v.text, ",") {
			return fmt.Errorf("filter %s: value %q contains a comma, which a simple %s list cannot carry", f.Field, v.text, f.Op)
		}
	}
	return nil
}

func checkValue(kind Kind, v Value) error {
	switch kind {
	case KindInt:
		if _, err := strconv.ParseInt(v.text, 10, 64); err != nil {
			return fmt.Errorf("value %q is not an integer", v.text)
		}
	case KindDecimal:
		if !validNumber(v.text) {
			return fmt.Errorf("value %q is not a decimal", v.text)
		}
	case KindTime:
		if _, err := time.Parse(time.RFC3339, v.text); err != nil {
			return fmt.Errorf("value %q is not an RFC 3339 timestamp with offset", v.text)
		}
	}
	return nil
}

func isFieldName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return s != ""
}

// queryValue is the filter as a query string value: "op:v1,v2". The
// operator is always explicit, so a value with a colon (a timestamp) cannot
// be read as an operator.
func (f Filter) queryValue() string {
	texts := make([]string, len(f.Values))
	for i, v := range f.Values {
		texts[i] = v.text
	}
	return string(f.Op) + ":" + strings.Join(texts, ",")
}

// Group is a complex filter: conditions combined with and/or, nested freely.
type Group struct {
	Or     bool
	Fields []Filter
	Groups []*Group
}

// And combines conditions so that all must hold.
func And(conds ...Condition) *Group { return group(false, conds) }

// Or combines conditions so that any may hold.
func Or(conds ...Condition) *Group { return group(true, conds) }

func group(or bool, conds []Condition) *Group {
	g := &Group{Or: or}
	for _, c := range conds {
		switch c := c.(type) {
		case Filter:
			g.Fields = append(g.Fields, c)
		case *Group:
			g.Groups = append(g.Groups, c)
		}
	}
	return g
}

// maxGroupDepth bounds nesting; deeper bodies are surely a mistake.
const maxGroupDepth = 16

// Validate checks every condition of the group and its subgroups.
func (g *Group) Validate() error { return g.validate(0) }

func (g *Group) validate(depth int) error {
	if depth > maxGroupDepth {
		return fmt.Errorf("filter groups nested deeper than %d", maxGroupDepth)
	}
	if len(g.Fields) == 0 && len(g.Groups) == 0 {
		return errors.New("empty filter group")
	}
	for _, f := range g.Fields {
		if err := f.Validate(false); err != nil {
			return err
		}
	}
	for _, sub := range g.Groups {
		if sub == nil {
			return errors.New("nil filter group")
		}
		if err := sub.validate(depth + 1); err != nil {
			return err
		}
	}
	return nil
}

type wireGroup struct {
	ConditionType string          `json:"conditionType"`
	Fields        []wireCondition `json:"fields"`
	Groups        []*Group        `json:"groups"`
}

type wireCondition struct {
	Field    string `json:"field"`
	Operator Op     `json:"operator"`
	Value    any    `json:"value"`
}

// MarshalJSON writes the spec's group shape.
func (g *Group) MarshalJSON() ([]byte, error) {
	w := wireGroup{ConditionType: "and", Fields: []wireCondition{}, Groups: g.Groups}
	if g.Or {
		w.ConditionType = "or"
	}
	if w.Groups == nil {
		w.Groups = []*Group{}
	}
	for _, f := range g.Fields {
		c := wireCondition{Field: f.Field, Operator: f.Op}
		switch n, many, _ := f.Op.arity(); {
		case many || n > 1:
			c.Value = f.Values
		case n == 1 && len(f.Values) == 1:
			c.Value = f.Values[0]
		}
		w.Fields = append(w.Fields, c)
	}
	return json.Marshal(w)
}

// Query is one order search request.
type Query struct {
	Filters      []Filter // simple filters, in the query string
	Complex      *Group   // non-nil: POST with this group as the body
	SortBy       string   // "" = the service's default (orderId)
	SortOrder    string   // "asc", "desc" or "" (the service's default, desc)
	Page         int      // 0 = 1
	ItemsPerPage int      // 0 = the service's default (50)
	LazyLoaded   bool
	With         []string
}

// Validate checks the query before anything is sent.
func (q Query) Validate() error {
	seen := make(map[string]bool, len(q.Filters))
	for _, f := range q.Filters {
		if err := f.Validate(true); err != nil {
			return err
		}
		if seen[f.Field] {
			return fmt.Errorf("filter %s: simple filters cannot combine two conditions on one field; use a complex filter", f.Field)
		}
		seen[f.Field] = true
		if isQueryParam(f.Field) {
			return fmt.Errorf("filter %s: the name is a query parameter, not a filter", f.Field)
		}
	}
	if q.Complex != nil {
		if err := q.Complex.Validate(); err != nil {
			return err
		}
	}
	if q.SortOrder != "" && q.SortOrder != "asc" && q.SortOrder != "desc" {
		return fmt.Errorf("sortOrder %q: want asc or desc", q.SortOrder)
	}
	if q.SortBy != "" && !isFieldName(q.SortBy) {
		return fmt.Errorf("sortBy %q: not a field name", q.SortBy)
	}
	if q.Page < 0 || q.ItemsPerPage < 0 {
		return errors.New("page and itemsPerPage must not be negative")
	}
	return nil
}

func isQueryParam(name string) bool {
	switch name {
	case "sortBy", "sortOrder", "page", "itemsPerPage", "lazyLoaded", "with":
		return true
	}
	return false
}

// Values encodes the query string; url.Values.Encode escapes '+' as %2B and
// ':' as %3A, so an offset arrives as '+'.
func (q Query) Values() url.Values {
	v := url.Values{}
	for _, f := range q.Filters {
		v.Set(f.Field, f.queryValue())
	}
	if q.SortBy != "" {
		v.Set("sortBy", q.SortBy)
	}
	if q.SortOrder != "" {
		v.Set("sortOrder", q.SortOrder)
	}
	if q.Page > 0 {
		v.Set("page", strconv.Itoa(q.Page))
	}
	if q.ItemsPerPage > 0 {
		v.Set("itemsPerPage", strconv.Itoa(q.ItemsPerPage))
	}
	if q.LazyLoaded {
		v.Set("lazyLoaded", "true")
	}
	if len(q.With) > 0 {
		v.Set("with", strings.Join(q.With, ","))
	}
	return v
}

// ParseFilter reads a simple filter as written in a query string:
// "op:v1,v2" or a plain value (eq). Values are typed by the field's kind.
func ParseFilter(field, raw string) (Filter, error) {
	op, rest := OpEq, raw
	if word, after, ok := strings.Cut(raw, ":"); ok {
		if _, _, known := Op(word).arity(); known {
			op, rest = Op(word), after
		}
	}
	var texts []string
	switch n, many, _ := op.arity(); {
	case n == 0:
	case many || n > 1:
		texts = strings.Split(rest, ",")
	default:
		texts = []string{rest}
	}
	kind, _ := FieldKind(field)
	f := Filter{Field: field, Op: op}
	for _, t := range texts {
		f.Values = append(f.Values, typedValue(kind, strings.TrimSpace(t)))
	}
	if err := f.Validate(true); err != nil {
		return Filter{}, err
	}
	return f, nil
}

func typedValue(kind Kind, text string) Value {
	switch kind {
	case KindInt:
		return Value{text: text, kind: KindInt, number: true}
	case KindDecimal:
		return Value{text: text, kind: KindDecimal, number: true}
	case KindTime:
		return Value{text: text, kind: KindTime}
	}
	return Str(text)
}

// ParseGroup reads a complex filter in the service's JSON group shape.
func ParseGroup(body []byte) (*Group, error) {
	var w struct {
		ConditionType string `json:"conditionType"`
		Fields        []struct {
			Field    string          `json:"field"`
			Operator Op              `json:"operator"`
			Value    json.RawMessage `json:"value"`
		} `json:"fields"`
		Groups []json.RawMessage `json:"groups"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("complex filter: %w", err)
	}
	g := &Group{}
	switch w.ConditionType {
	case "and", "":
	case "or":
		g.Or = true
	default:
		return nil, fmt.Errorf("complex filter: conditionType %q: want and or or", w.ConditionType)
	}
	for _, c := range w.Fields {
		kind, _ := FieldKind(c.Field)
		f := Filter{Field: c.Field, Op: c.Operator}
		var raws []json.RawMessage
		switch v := strings.TrimSpace(string(c.Value)); {
		case v == "" || v == "null":
		case v[0] == '[':
			if err := json.Unmarshal(c.Value, &raws); err != nil {
				return nil, fmt.Errorf("complex filter %s: %w", c.Field, err)
			}
		default:
			raws = []json.RawMessage{c.Value}
		}
		for _, r := range raws {
			var s string
			if json.Unmarshal(r, &s) == nil {
				f.Values = append(f.Values, typedValue(kind, s))
			} else if t := strings.TrimSpace(string(r)); validNumber(t) {
				f.Values = append(f.Values, Value{text: t, kind: max(kind, KindInt), number: true})
			} else {
				return nil, fmt.Errorf("complex filter %s: value %s is neither a string nor a number", c.Field, r)
			}
		}
		g.Fields = append(g.Fields, f)
	}
	for _, raw := range w.Groups {
		sub, err := ParseGroup(raw)
		if err != nil {
			return nil, err
		}
		g.Groups = append(g.Groups, sub)
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return g, nil
}
