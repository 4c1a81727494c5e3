package plentysim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawSearch sends a search and returns what arrived, including a transport
// error or an error reading the body.
func rawSearch(t *testing.T, h *harness, ctx context.Context, tok string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.srv.URL+PathSearch+"?sortOrder=asc", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name   string
		faults Faults
		check  func(t *testing.T, resp *http.Response, body []byte, err error, normal []byte)
	}{
		{"server error", Faults{ServerErrorRate: 1}, func(t *testing.T, resp *http.Response, body []byte, err error, _ []byte) {
			if err != nil || resp.StatusCode != 500 || string(body) != `{"error":{"message":"Internal Server Error","code":500}}` ||
				resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%v %v %s", err, resp, body)
			}
		}},
		{"html", Faults{HTMLRate: 1}, func(t *testing.T, resp *http.Response, body []byte, err error, _ []byte) {
			if err != nil || resp.StatusCode != 502 || resp.Header.Get("Content-Type") != "text/html" || !bytes.Contains(body, []byte("<html>")) {
				t.Errorf("%v %v %s", err, resp, body)
			}
		}},
		{"truncate", Faults{TruncateRate: 1}, func(t *testing.T, resp *http.Response, body []byte, err error, normal []byte) {
			if err != nil || resp.StatusCode != 200 || json.Valid(body) || len(body) == 0 || !bytes.HasPrefix(normal, body) ||
				resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
				t.Errorf("%v %v %s", err, resp, body)
			}
		}},
		{"garbage", Faults{GarbageRate: 1}, func(t *testing.T, resp *http.Response, body []byte, err error, _ []byte) {
			if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || json.Valid(body) {
				t.Errorf("%v %v %s", err, resp, body)
			}
		}},
		{"drop", Faults{DropRate: 1}, func(t *testing.T, resp *http.Response, body []byte, err error, normal []byte) {
			if err == nil {
				t.Fatalf("no error; got %v %s", resp, body)
			}
			if resp != nil && (resp.StatusCode != 200 || !bytes.HasPrefix(normal, body) || len(body) >= len(normal)) {
				t.Errorf("partial response %v %s", resp, body)
			}
			if resp != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("error %v, want unexpected EOF", err)
			}
		}},
		{"first hit wins", Faults{ServerErrorRate: 1, HTMLRate: 1, DropRate: 1}, func(t *testing.T, resp *http.Response, _ []byte, err error, _ []byte) {
			if err != nil || resp.StatusCode != 500 {
				t.Errorf("%v %v", err, resp)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, tok := filterHarness(t)
			_, normal, err := rawSearch(t, h, context.Background(), tok)
			if err != nil {
				t.Fatal(err)
			}
			h.sim.SetFaults(tt.faults)
			resp, body, err := rawSearch(t, h, context.Background(), tok)
			if resp != nil && resp.Header.Get(shortLimit) == "" {
				t.Error("no throttle headers on a fault")
			}
			tt.check(t, resp, body, err, normal)
			if n := h.sim.Stats().FaultsInjected; n != 1 {
				t.Errorf("FaultsInjected %d", n)
			}
			// Faults apply to search only.
			if r := h.do(http.MethodPost, PathLogin, "", loginBody("demo", "demo")); r.status != http.StatusOK {
				t.Errorf("login with faults: %d", r.status)
			}
		})
	}
}

func TestFaultSequenceDeterministic(t *testing.T) {
	run := func(seed int64) []int {
		h := newHarness(t, Config{Seed: seed, Faults: Faults{ServerErrorRate: 0.3, HTMLRate: 0.3}})
		tok := h.login()
		var codes []int
		for range 30 {
			codes = append(codes, h.do(http.MethodGet, PathSearch, tok, nil).status)
		}
		return codes
	}
	a, b := run(42), run(42)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different faults:\n%v\n%v", a, b)
	}
	for _, code := range []int{200, 500, 502} {
		if !slices.Contains(a, code) {
			t.Errorf("no %d in %v", code, a)
		}
	}
	if c := run(43); slices.Equal(a, c) {
		t.Errorf("seeds 42 and 43 gave the same faults %v", a)
	}
}

func TestLatency(t *testing.T) {
	t.Run("added to every search", func(t *testing.T) {
		for _, f := range []Faults{{Latency: 30 * time.Millisecond}, {SlowRate: 1, SlowDelay: 30 * time.Millisecond}} {
			h, tok := filterHarness(t)
			h.sim.SetFaults(f)
			start := time.Now()
			h.search(tok, "", nil)
			if d := time.Since(start); d < 30*time.Millisecond {
				t.Errorf("%+v: search took %v", f, d)
			}
		}
	})
	t.Run("honours cancellation", func(t *testing.T) {
		h, tok := filterHarness(t)
		h.sim.SetFaults(Faults{Latency: time.Hour})
		var calls atomic.Int32
		h.sim.SetBeforeSearch(func(*http.Request, int) { calls.Add(1) })
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, _, err := rawSearch(t, h, ctx, tok); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err %v, want deadline exceeded", err)
		}
		// Close waits for the handler: it returns only because the handler
		// gave up its hour of latency when the client went away.
		h.srv.Close()
		if calls.Load() != 0 {
			t.Errorf("a cancelled search reached BeforeSearch")
		}
	})
}

// TestStatsCounts checks the call counters over a mixed sequence.
func TestStatsCounts(t *testing.T) {
	h := newHarness(t, Config{})
	tok := h.login()
	h.search(tok, "", nil)
	h.search(tok, "", []byte(`{}`))
	h.do(http.MethodGet, "/rest/nothing", tok, nil)
	h.do(http.MethodGet, PathSearch, "", nil)
	h.do(http.MethodPost, PathRefresh, "", []byte(`{}`))
	st := h.sim.Stats()
	want := Stats{Calls: 6, SearchCalls: 3, LoginCalls: 1, RefreshCalls: 1, Unauthorized401: 2, ActiveSessions: 1, MaxConcurrentSessions: 1}
	st.LastAccept = ""
	if st != want {
		t.Errorf("stats\n got  %+v\n want %+v", st, want)
	}
	if !strings.Contains(h.do(http.MethodGet, PathSearch, tok, nil).header.Get("Content-Type"), "json") {
		t.Error("search Content-Type")
	}
}

// TestDateSkew: DateSkew moves the Date header only; order timestamps keep
// the true time.
func TestDateSkew(t *testing.T) {
	h := newHarness(t, Config{})
	h.sim.SetFaults(Faults{DateSkew: 2 * time.Hour})
	r := h.do(http.MethodGet, PathSearch, "", nil)
	d, err := http.ParseTime(r.header.Get("Date"))
	if err != nil || !d.Equal(h.clock.Now().Add(2*time.Hour).Truncate(time.Second)) {
		t.Errorf("Date %q with a skew of 2h; the clock says %v", r.header.Get("Date"), h.clock.Now())
	}
	h.sim.SetFaults(Faults{})
	r = h.do(http.MethodGet, PathSearch, "", nil)
	if d, _ := http.ParseTime(r.header.Get("Date")); !d.Equal(h.clock.Now().Truncate(time.Second)) {
		t.Errorf("Date %q without a skew", r.header.Get("Date"))
	}
}

// TestChangeWhilePaging: with the fault on, every page after the first of a
// scan is served after one order of the queried set changed (it leaves a
// window in the past); the first page never is, and without the fault the
// set stays.
func TestChangeWhilePaging(t *testing.T) {
	for _, rate := range []float64{0, 1} {
		h := newHarness(t, Config{Faults: Faults{ChangeWhilePaging: rate}})
		h.sim.Generate(30, h.clock.Now().Add(-time.Hour), h.clock.Now().Add(-time.Minute))
		h.clock.Advance(10 * time.Second)
		tok := h.login()
		q := "sortBy=orderId&sortOrder=asc&itemsPerPage=10&updatedAt=between:" +
			h.clock.Now().Add(-2*time.Hour).Format("2006-01-02T15:04:05Z") + "," + h.clock.Now().Add(-30*time.Second).Format("2006-01-02T15:04:05Z")
		first := h.search(tok, q+"&page=1", nil)
		second := h.search(tok, q+"&page=2", nil)
		third := h.search(tok, q+"&page=3", nil)
		want := []int{30, 30, 30}
		if rate == 1 {
			want = []int{30, 29, 28}
		}
		if got := []int{first.TotalsCount, second.TotalsCount, third.TotalsCount}; !slices.Equal(got, want) {
			t.Errorf("ChangeWhilePaging %g: totalsCount of pages 1-3 %v, want %v", rate, got, want)
		}
	}
}
