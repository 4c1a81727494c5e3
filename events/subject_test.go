package events_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/orderwatch/orderwatch/events"
)

func TestStatusTokens(t *testing.T) {
	for _, tc := range []struct {
		status events.Decimal
		token  string
	}{
		{"5", "5"}, {"5.1", "5_1"}, {"5.10", "5_1"}, {"05.10", "5_1"}, {"7.01", "7_01"}, {"11.1", "11_1"},
		{"1e1", "10"}, {"-1", "-1"}, {"-0", "0"}, {"", "none"},
	} {
		if got := events.StatusToken(tc.status); got != tc.token {
			t.Errorf("StatusToken(%q) = %q, want %q", tc.status, got, tc.token)
		}
		back, err := events.ParseStatusToken(tc.token)
		if err != nil || !back.Equal(tc.status) {
			t.Errorf("ParseStatusToken(%q) = %q, %v; want %q", tc.token, back, err, tc.status)
		}
	}
	for s, tok := range map[events.Decimal]string{"*": "_", ">": "_", "a.b": "a_b", "5 1": "5_1"} {
		if got := events.StatusToken(s); got != tok {
			t.Errorf("StatusToken(%q) = %q, want %q (never a wildcard, never none)", s, got, tok)
		}
	}
	for _, bad := range []string{"", "5.1", "5_1_2", "5_10", "_1", "1_", "05", "x", "1e1", "5_", "*", ">"} {
		if d, err := events.ParseStatusToken(bad); err == nil {
			t.Errorf("ParseStatusToken(%q) = %q, want an error", bad, d)
		}
	}
}

// TestFiltersMatchWhatTheyName: each filter, matched by the NATS server's
// own subject matching, selects exactly the subjects it names.
func TestFiltersMatchWhatTheyName(t *testing.T) {
	subjects := []string{
		"orders.created.1042",
		"orders.discovered.1042",
		"orders.lock_changed.1042",
		"orders.updated.1042",
		"orders.status_changed.5.6.1042",
		"orders.status_changed.5_1.6.7",
		"orders.status_changed.none.8.7",
		"orders.status_changed.6.8.1042",
		"orders.status_changed.5.5_1.7",
		"orders.created.7",
		"shop2.orders.status_changed.6.8.1042",
	}
	p := events.Prefix("orders")
	for _, tc := range []struct {
		filters []string
		want    []string
	}{
		{[]string{p.All()}, subjects[:10]},
		{[]string{p.Into("8")}, []string{"orders.status_changed.none.8.7", "orders.status_changed.6.8.1042"}},
		{[]string{p.Into("5.1")}, []string{"orders.status_changed.5.5_1.7"}},
		{[]string{p.OutOf("5.10")}, []string{"orders.status_changed.5_1.6.7"}},
		{[]string{p.OutOf("")}, []string{"orders.status_changed.none.8.7"}},
		{[]string{p.Transition("5", "6")}, []string{"orders.status_changed.5.6.1042"}},
		{p.Order(1042), []string{"orders.created.1042", "orders.discovered.1042", "orders.lock_changed.1042", "orders.updated.1042", "orders.status_changed.5.6.1042", "orders.status_changed.6.8.1042"}},
		{[]string{p.Type(events.Created)}, []string{"orders.created.1042", "orders.created.7"}},
		{[]string{p.Type(events.StatusChanged)}, []string{"orders.status_changed.5.6.1042", "orders.status_changed.5_1.6.7", "orders.status_changed.none.8.7", "orders.status_changed.6.8.1042", "orders.status_changed.5.5_1.7"}},
		{[]string{events.Prefix("shop2.orders").Into("8")}, []string{"shop2.orders.status_changed.6.8.1042"}},
	} {
		var got []string
		for _, s := range subjects {
			if slices.ContainsFunc(tc.filters, func(f string) bool { return server.SubjectMatchesFilter(s, f) }) {
				got = append(got, s)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%v matches %v, want %v", tc.filters, got, tc.want)
		}
	}
	// The two filters of one order can be one consumer's FilterSubjects.
	f := p.Order(1042)
	if server.SubjectsCollide(f[0], f[1]) {
		t.Errorf("%v overlap", f)
	}
}

func TestParseSubject(t *testing.T) {
	for _, tc := range []struct {
		prefix  events.Prefix
		subject string
		want    events.Subject
	}{
		{"", "orders.created.1042", events.Subject{Type: events.Created, OrderID: 1042}},
		{"orders", "orders.status_changed.5_1.none.7", events.Subject{Type: events.StatusChanged, OrderID: 7, From: "5.1"}},
		{"orders", "orders.status_changed.none.7_01.7", events.Subject{Type: events.StatusChanged, OrderID: 7, To: "7.01"}},
		{"shop1.orders", "shop1.orders.updated.3", events.Subject{Type: events.Updated, OrderID: 3}},
	} {
		got, err := tc.prefix.Parse(tc.subject)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tc.subject, got, err, tc.want)
		}
	}
	for _, bad := range []string{"orders", "orders.created", "other.created.1", "orders.created.x", "orders.created.0", "orders.created.+1",
		"orders.status_changed.5.1", "orders.created.5.6.1", "orders.status_changed.5.x.1", "shop1.orders.created.1"} {
		if got, err := events.DefaultPrefix.Parse(bad); err == nil {
			t.Errorf("Parse(%q) = %+v, want an error", bad, got)
		}
	}
	if _, err := events.DefaultPrefix.Parse("orders.deleted.1"); !errors.Is(err, events.ErrUnknownType) {
		t.Errorf("a subject of an unknown type: %v", err)
	}
}
