package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
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

// TestAskStateWhatIsNotAWatcher: -url pointed at something that is not a
// watcher's HTTP port (a login page or a proxy's HTML, answered with 200
// or with an error) is an error that says so, short, never its page as
// if it were the listing.
func TestAskStateWhatIsNotAWatcher(t *testing.T) {
	page := "<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>" + strings.Repeat("<p>lorem ipsum</p>", 500) + "</body></html>\n"
	for _, code := range []int{http.StatusOK, http.StatusBadGateway} {
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
			rw.Header().Set("Content-Type", "text/html; charset=utf-8")
			rw.WriteHeader(code)
			io.WriteString(rw, page)
		}))
		for _, q := range []StateQuery{{}, {OrderID: 2302}, {List: url.Values{"status": {"5"}}}} {
			body, err := AskState(t.Context(), srv.URL, q)
			if err == nil {
				t.Errorf("%d, %s: an HTML page was taken for the answer: %.80q", code, q.Path(), body)
				continue
			}
			if msg := err.Error(); !strings.Contains(msg, "HTML") || !strings.Contains(msg, srv.URL) || len(msg) > 400 {
				t.Errorf("%d, %s: %d bytes of error, want a short one that names the HTML and the URL: %.500s", code, q.Path(), len(msg), msg)
			}
		}
		srv.Close()
	}
}

// TestAskStateLargePage: a listing's page of 10,000 orders (-limit 10000)
// is several megabytes: AskState returns it whole, never cut short.
func TestAskStateLargePage(t *testing.T) {
	var b strings.Builder
	b.WriteString("{\n  \"orders\": [\n")
	for i := range 10000 {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, `    {"orderId": %d, "statusSince": "2026-11-20T11:40:17+01:00", "state": {"statusId": 5, "lockStatus": "unlocked", "typeId": 1, "referrerId": 4.01, "plentyId": 41523, "ownerId": "3", "locationId": "1", "createdAt": "2026-11-20T11:40:17+01:00", "updatedAt": "2026-11-22T10:02:41+01:00"}}`, 1000+i)
	}
	b.WriteString("\n  ],\n  \"next\": 11000\n}\n")
	page := b.String()
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		io.WriteString(rw, page)
	}))
	defer srv.Close()
	body, err := AskState(t.Context(), srv.URL, StateQuery{List: url.Values{"limit": {"10000"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(body) != len(page) || !json.Valid(body) {
		t.Errorf("a page of %d bytes came back with %d bytes (valid JSON: %v)", len(page), len(body), json.Valid(body))
	}
}

// TestAskStateTimeout: a watcher that accepts the request and never
// answers: AskState gives up and says who did not answer in time.
func TestAskStateTimeout(t *testing.T) {
	hung := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hung }))
	defer srv.Close()
	defer close(hung)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := AskState(ctx, srv.URL, StateQuery{})
	if err == nil || !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("a watcher that does not answer: %v", err)
	}
}

func TestWatcherBase(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:9464": "http://127.0.0.1:9464",
		"127.0.0.1:9464/":       "http://127.0.0.1:9464",
		"http://127.0.0.1:9464/state/orders?status=5&olderThan=48h": "http://127.0.0.1:9464",
		"http://127.0.0.1:9464/state":                               "http://127.0.0.1:9464",
		"http://127.0.0.1:9464/state/orders/2302":                   "http://127.0.0.1:9464",
		"http://127.0.0.1:9464/metrics":                             "http://127.0.0.1:9464",
		"http://member:9090/shops/berlin":                           "http://member:9090/shops/berlin",
		"http://member:9090/shops/berlin/state/orders?status=5":     "http://member:9090/shops/berlin",
		"https://watcher.example/orderwatch/readyz":                 "https://watcher.example/orderwatch",
	} {
		if got := WatcherBase(in); got != want {
			t.Errorf("WatcherBase(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestAskStateShopElsewhere: -shop names a shop the member does not run:
// the error names the member that does, not a wrong port.
func TestAskStateShopElsewhere(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/state" {
			rw.Header().Set("Content-Type", "application/json")
			io.WriteString(rw, `{"instance": "member-1", "members": {"member-1": 1, "member-2": 1}, "shops": [{"id": "berlin", "state": "active", "holder": "member-1"}, {"id": "paris", "state": "elsewhere", "holder": "member-2"}]}`)
			return
		}
		http.Error(rw, "shop paris does not run on this member (see /state)", http.StatusNotFound)
	}))
	defer srv.Close()
	_, err := AskState(t.Context(), srv.URL, StateQuery{Shop: "paris", List: url.Values{"status": {"5"}}})
	if err == nil || !strings.Contains(err.Error(), "paris on member-2") || strings.Contains(err.Error(), "HTTP port") {
		t.Errorf("a shop of another member: %v; want it to name the member that runs it", err)
	}
}
