package pipeline

import (
	"net/url"
	"testing"
)

func TestStateQueryPath(t *testing.T) {
	for _, tc := range []struct {
		q    StateQuery
		want string
	}{
		{StateQuery{}, "/state"},
		{StateQuery{OrderID: 2302}, "/state/orders/2302"},
		{StateQuery{List: url.Values{"status": {"5"}, "olderThan": {"48h0m0s"}}}, "/state/orders?olderThan=48h0m0s&status=5"},
		{StateQuery{OrderID: 7, Shop: "berlin"}, "/shops/berlin/state/orders/7"},
	} {
		if got := tc.q.Path(); got != tc.want {
			t.Errorf("%+v: %s, want %s", tc.q, got, tc.want)
		}
	}
}
