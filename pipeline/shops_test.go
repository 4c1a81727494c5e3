package pipeline

import (
	"errors"
	"strings"
	"testing"

	"github.com/orderwatch/orderwatch/internal/testnats"
)

// TestSecondShopOnDefaultsRefused: two shops with default settings on
// one NATS would share the stream ORDERS and its subjects; the second
// shop's watcher refuses to start (a configuration error, exit 2), naming
// both shops and what to set.
func TestSecondShopOnDefaultsRefused(t *testing.T) {
	nats := testnats.Start(t).ClientURL()
	a, err := New(testConfig(t, "http://a.example", nats), Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(testConfig(t, "http://b.example", nats), Options{Logger: quiet()})
	if err == nil {
		b.Close()
		t.Fatal("shop b started on shop a's stream")
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("%v: want a configuration error", err)
	}
	for _, s := range []string{"a_example", "http://a.example", "b_example", "http://b.example", "WATCHER_STREAM"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not name %q: %v", s, err)
		}
	}
}
