package pipeline

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/state"
)

// DefaultListLimit is the page size of GET /state/orders without a limit.
const DefaultListLimit = 500

// OrderList is a page of GET /state/orders.
type OrderList struct {
	Orders []ListedOrder `json:"orders"`
	// Next is the cursor of the following page (the after parameter),
	// null when the listing is complete.
	Next *int64 `json:"next"`
}

// ListedOrder is one order of a listing.
type ListedOrder struct {
	OrderID int64 `json:"orderId"`
	// StatusSince is when the order entered its status, a lower bound of
	// its time in it (see diff.EnteredStatus).
	StatusSince order.Time `json:"statusSince"`
	State       diff.State `json:"state"` // the shape of an event's data.after
}

// ListQuery is a listing's request: the filter and the page size.
type ListQuery struct {
	Filter state.ListFilter
	Limit  int
}

// ParseListQuery reads the parameters of GET /state/orders (also `watcher
// state -status ...`): status (a number, or "none" for orders without a
// status), olderThan (a duration: in the status for longer than that
// before now), after (the cursor) and limit (1 to state.ListMax, default
// DefaultListLimit). An unknown parameter is an error: a misspelt filter
// would otherwise list every order.
func ParseListQuery(q url.Values, now time.Time) (ListQuery, error) {
	lq := ListQuery{Limit: DefaultListLimit}
	for name, vs := range q {
		if len(vs) != 1 {
			return ListQuery{}, fmt.Errorf("parameter %s given %d times", name, len(vs))
		}
		v := strings.TrimSpace(vs[0])
		switch name {
		case "status":
			var d order.Decimal
			if !strings.EqualFold(v, "none") {
				var err error
				if d, err = order.ParseDecimal(v); err != nil || d.IsZero() {
					return ListQuery{}, fmt.Errorf("status %q: want a status number or none", v)
				}
			}
			lq.Filter.Status = &d
		case "olderThan":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return ListQuery{}, fmt.Errorf("olderThan %q: want a positive duration such as 48h or 90m", v)
			}
			lq.Filter.EnteredBefore = now.Add(-d)
		case "after":
			id, err := strconv.ParseInt(v, 10, 64)
			if err != nil || id < 0 {
				return ListQuery{}, fmt.Errorf("after %q: want an order id (the previous page's next)", v)
			}
			lq.Filter.AfterID = id
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > state.ListMax {
				return ListQuery{}, fmt.Errorf("limit %q: want 1 to %d", v, state.ListMax)
			}
			lq.Limit = n
		default:
			return ListQuery{}, fmt.Errorf("unknown parameter %q: status, olderThan, after and limit are known", name)
		}
	}
	return lq, nil
}

// ListOrders reads one page of a listing from the state file.
func ListOrders(s *state.Store, q ListQuery) (OrderList, error) {
	page, next, err := s.ListOrders(q.Filter, q.Limit)
	if err != nil {
		return OrderList{}, err
	}
	out := OrderList{Orders: make([]ListedOrder, len(page))}
	for i, o := range page {
		out.Orders[i] = ListedOrder{OrderID: o.ID, StatusSince: o.State.Since(), State: o.State}
	}
	if next != 0 {
		out.Next = &next
	}
	return out, nil
}
