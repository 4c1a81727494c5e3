package poller_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/poller"
)

// TestLocalScopeAgreesWithTheService: for every filter the simulator (the
// independent model of the service) knows, orderwatch's local evaluation
// selects exactly the orders the service's search returns for it, by GET
// and by POST (complex groups). Over HTTP, on 400 generated orders.
func TestLocalScopeAgreesWithTheService(t *testing.T) {
	e := newEnv(t, plentysim.Config{MaxItemsPerPage: 250}, poller.Config{})
	e.sim.Generate(400, t0.Add(-10*24*time.Hour), t0.Add(-time.Minute))
	all := searchIDs(t, e, order.Query{}, nil)
	if len(all) != 400 {
		t.Fatalf("%d orders", len(all))
	}
	states := map[int64]diff.State{}
	for _, o := range all {
		states[o.ID] = diff.StateOf(o)
	}
	simple := [][2]string{
		{"statusId", "in:5,6"}, {"statusId", "5.1"}, {"statusId", "between:5,7.01"}, {"statusId", "not:3"},
		{"statusId", "lt:5.1"}, {"statusId", "gte:7"}, {"orderTypeId", "1"}, {"orderTypeId", "in:2,3"},
		{"referrerId", "between:1,4.01"}, {"referrerId", "not:1"}, {"createdAt", "gte:" + t0.Add(-5*24*time.Hour).Format(time.RFC3339)},
		{"orderId", "between:1100,1200"},
	}
	groups := []string{
		`{"conditionType":"or","fields":[{"field":"statusId","operator":"in","value":[5,6]},{"field":"orderTypeId","operator":"eq","value":2}]}`,
		`{"conditionType":"and","fields":[{"field":"statusId","operator":"nin","value":[3,4]}],"groups":[{"conditionType":"or","fields":[{"field":"referrerId","operator":"lt","value":4},{"field":"createdAt","operator":"lt","value":"` + t0.Add(-3*24*time.Hour).Format(time.RFC3339) + `"}]}]}`,
	}
	check := func(name string, fs []order.Filter, g *order.Group) {
		t.Helper()
		var want []int64
		for _, o := range searchIDs(t, e, order.Query{Filters: fs, Complex: g}, nil) {
			want = append(want, o.ID)
		}
		// Everything evaluated locally: an "or" group that mixes in a
		// changing field (lockStatus, matching no order) is.
		whole := &order.Group{Fields: fs}
		if g != nil {
			whole.Groups = []*order.Group{g}
		}
		never := order.Eq("lockStatus", order.Str("no such lock"))
		sp, err := diff.SplitScope(nil, order.Or(whole, never))
		if err != nil {
			t.Fatal(err)
		}
		if sp.Local == nil || sp.SentGroup != nil || len(sp.Sent) != 0 {
			t.Fatalf("%s: not evaluated locally as a whole: %+v", name, sp)
		}
		var got []int64
		for _, o := range all {
			s := states[o.ID]
			if sp.Local.Match(o.ID, &s) {
				got = append(got, o.ID)
			}
		}
		if len(want) == 0 || len(want) == len(all) {
			t.Errorf("%s: the service returns %d of %d orders: not a telling case", name, len(want), len(all))
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: local evaluation selects %d orders, the service %d", name, len(got), len(want))
		}
	}
	for _, kv := range simple {
		f, err := order.ParseFilter(kv[0], kv[1])
		if err != nil {
			t.Fatal(err)
		}
		check(kv[0]+"="+kv[1], []order.Filter{f}, nil)
	}
	for _, body := range groups {
		g, err := order.ParseGroup([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		check(body, nil, g)
	}
}

// searchIDs reads every page of a search, in id order.
func searchIDs(t *testing.T, e *env, q order.Query, out []order.Order) []order.Order {
	t.Helper()
	q.SortBy, q.SortOrder, q.ItemsPerPage = "orderId", "asc", 250
	for page := 1; ; page++ {
		q.Page = page
		p, err := e.client.SearchOrders(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Orders...)
		if p.IsLastPage || len(p.Orders) == 0 {
			return out
		}
	}
}
