package plenty

import "github.com/orderwatch/orderwatch/plenty/order"

// The order model moved to plenty/order, a leaf package with the standard
// library only, so that diff and state no longer import the HTTP client.
// These aliases keep the callers that still name the model through plenty
// compiling (cmd/watcher, which is being rewritten in parallel, and
// poller/sweep.go). They go once those callers import plenty/order: nothing
// in this package uses them.

// Types.
type (
	Condition   = order.Condition
	Decimal     = order.Decimal
	DecodeError = order.DecodeError
	EntryError  = order.EntryError
	Filter      = order.Filter
	FlexInt     = order.FlexInt
	FlexString  = order.FlexString
	Group       = order.Group
	Kind        = order.Kind
	Op          = order.Op
	Order       = order.Order
	Page        = order.Page
	Query       = order.Query
	Time        = order.Time
	Token       = order.Token
	Value       = order.Value
)

// Constants.
const (
	OpEq      = order.OpEq
	OpNot     = order.OpNot
	OpIn      = order.OpIn
	OpNin     = order.OpNin
	OpNull    = order.OpNull
	OpNn      = order.OpNn
	OpLt      = order.OpLt
	OpLte     = order.OpLte
	OpGt      = order.OpGt
	OpGte     = order.OpGte
	OpBetween = order.OpBetween

	KindUnknown = order.KindUnknown
	KindInt     = order.KindInt
	KindDecimal = order.KindDecimal
	KindTime    = order.KindTime
	KindString  = order.KindString
)

// Functions and variables.
var (
	ErrInvalidDecimal = order.ErrInvalidDecimal

	DecimalFromInt = order.DecimalFromInt
	MustDecimal    = order.MustDecimal
	ParseDecimal   = order.ParseDecimal
	ParseTime      = order.ParseTime
	DecodeOrder    = order.DecodeOrder
	DecodePage     = order.DecodePage
	FieldKind      = order.FieldKind

	F           = order.F
	Eq          = order.Eq
	Not         = order.Not
	Lt          = order.Lt
	Lte         = order.Lte
	Gt          = order.Gt
	Gte         = order.Gte
	In          = order.In
	Nin         = order.Nin
	Between     = order.Between
	Null        = order.Null
	NotNull     = order.NotNull
	And         = order.And
	Or          = order.Or
	ParseFilter = order.ParseFilter
	ParseGroup  = order.ParseGroup

	Int = order.Int
	Dec = order.Dec
	Str = order.Str
	At  = order.At
)
