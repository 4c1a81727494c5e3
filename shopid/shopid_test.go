package shopid_test

import (
	"strings"
	"testing"

	"github.com/orderwatch/orderwatch/shopid"
)

func TestFromURL(t *testing.T) {
	long := "https://a-very-long-subdomain-of-a-shop.example-plentymarkets-cloud-01.com/"
	for _, c := range []struct{ url, want string }{
		{"https://p12345.my.plentysystems.com", "p12345_my_plentysystems_com"},
		{"https://P12345.My.Plentysystems.com/", "p12345_my_plentysystems_com"},     // case and a trailing slash
		{"http://p12345.my.plentysystems.com", "p12345_my_plentysystems_com"},       // the scheme
		{"https://user@p12345.my.plentysystems.com", "p12345_my_plentysystems_com"}, // user information
		{"http://127.0.0.1:8080", "127_0_0_1_8080"},
		{"https://shop.example/rest-proxy/", "shop_example_rest-proxy"},
	} {
		if got := shopid.FromURL(c.url); got != c.want {
			t.Errorf("FromURL(%q) = %q, want %q", c.url, got, c.want)
		}
		if err := shopid.Valid(shopid.FromURL(c.url)); err != nil {
			t.Errorf("FromURL(%q) is not a valid id: %v", c.url, err)
		}
	}
	a, b := shopid.FromURL(long), shopid.FromURL(strings.Replace(long, "01", "02", 1))
	if len(a) > shopid.MaxLen || a == b || shopid.Valid(a) != nil {
		t.Errorf("long URLs: %q and %q, want distinct valid ids of at most %d characters", a, b, shopid.MaxLen)
	}
	if shopid.FromURL(long) != a {
		t.Error("FromURL is not stable")
	}
}

func TestValid(t *testing.T) {
	for _, ok := range []string{"shop-a", "a", "p12345_my_plentysystems_com", strings.Repeat("a", shopid.MaxLen)} {
		if err := shopid.Valid(ok); err != nil {
			t.Errorf("Valid(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Shop", "shop.a", "shop a", "-a", "_a", "a>", "a*", strings.Repeat("a", shopid.MaxLen+1)} {
		if shopid.Valid(bad) == nil {
			t.Errorf("Valid(%q) accepted", bad)
		}
	}
}
