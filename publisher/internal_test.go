package publisher

import "testing"

func TestSubjectCovers(t *testing.T) {
	for _, tc := range []struct {
		filter, sub string
		want        bool
	}{
		{"orders.>", "orders.>", true},
		{">", "orders.>", true},
		{"*.>", "orders.>", true},
		{"orders.>", "orders.created.>", true},
		{"orders.*.>", "orders.created.>", true},
		{"orders.*", "orders.>", false},
		{"orders.created.>", "orders.>", false},
		{"orders.>", "orders", false},
		{"orders", "orders.>", false},
		{"shop.orders.>", "orders.>", false},
		{"orders.>", "shop.orders.>", false},
		{"*.*.>", "orders.>", false}, // orders.x matches the sub, not the filter
		{"a.*.c", "a.*.c", true},
		{"a.b.c", "a.*.c", false},
		{"a.*.c", "a.b.c", true},
		{"a.*", "a.b.c", false},
		{"a.b", "a.b", true},
	} {
		if got := subjectCovers(tc.filter, tc.sub); got != tc.want {
			t.Errorf("subjectCovers(%q, %q) = %v, want %v", tc.filter, tc.sub, got, tc.want)
		}
	}
}

func TestOrderKey(t *testing.T) {
	for subject, want := range map[string]string{
		"orders.created.17":                 "17",
		"orders.status_changed.5_1.6.123":   "123",
		"shop.eu.orders.lock_changed.99999": "99999",
		"plain":                             "plain",
	} {
		if got := orderKey(subject); got != want {
			t.Errorf("orderKey(%q) = %q, want %q", subject, got, want)
		}
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://user:secret@host:4222": "nats://redacted@host:4222",
		"nats://s3cr3t-token@host":     "nats://redacted@host",
		"nats://host:4222":             "nats://host:4222",
		"nats://a:b@h1,nats://c:d@h2":  "nats://redacted@h1,nats://redacted@h2",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
