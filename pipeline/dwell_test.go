package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/state"
)

func dwellOf(status string, orders int, oldest string) state.StatusDwell {
	d := state.StatusDwell{Orders: orders}
	if status != "" {
		d.Status = order.MustDecimal(status)
	}
	if oldest != "" {
		t, err := time.Parse(time.RFC3339, oldest)
		if err != nil {
			panic(err)
		}
		d.Oldest = t
	}
	return d
}

func TestDwellRows(t *testing.T) {
	scan := []state.StatusDwell{
		dwellOf("", 2, "2026-11-20T00:00:00Z"),
		dwellOf("3", 50, "2026-11-10T00:00:00Z"),
		dwellOf("5", 7, "2026-11-25T00:00:00Z"),
		dwellOf("5.1", 7, "2026-11-01T00:00:00Z"),
		dwellOf("6", 1, ""), // no known time
		dwellOf("7", 30, "2026-11-24T00:00:00Z"),
	}
	row := func(status string, orders int, oldest string) string {
		return fmt.Sprintf("%s=%d@%s", status, orders, oldest)
	}
	render := func(rows []dwellRow) []string {
		var out []string
		for _, r := range rows {
			o := ""
			if !r.oldest.IsZero() {
				o = r.oldest.Format(time.RFC3339)
			}
			out = append(out, row(r.status, r.orders, o))
		}
		return out
	}
	for _, tc := range []struct {
		max  int
		want []string
	}{
		{max: 100, want: []string{
			row("none", 2, "2026-11-20T00:00:00Z"), row("3", 50, "2026-11-10T00:00:00Z"), row("5", 7, "2026-11-25T00:00:00Z"),
			row("5.1", 7, "2026-11-01T00:00:00Z"), row("6", 1, ""), row("7", 30, "2026-11-24T00:00:00Z")}},
		{max: 6, want: []string{ // exactly max: no other
			row("none", 2, "2026-11-20T00:00:00Z"), row("3", 50, "2026-11-10T00:00:00Z"), row("5", 7, "2026-11-25T00:00:00Z"),
			row("5.1", 7, "2026-11-01T00:00:00Z"), row("6", 1, ""), row("7", 30, "2026-11-24T00:00:00Z")}},
		{max: 4, want: []string{ // the 3 with most orders (5 before 5.1 on a tie), the rest summed
			row("3", 50, "2026-11-10T00:00:00Z"), row("5", 7, "2026-11-25T00:00:00Z"), row("7", 30, "2026-11-24T00:00:00Z"),
			row("other", 10, "2026-11-01T00:00:00Z")}},
		{max: 2, want: []string{row("3", 50, "2026-11-10T00:00:00Z"), row("other", 47, "2026-11-01T00:00:00Z")}},
	} {
		got := render(dwellRows(scan, tc.max))
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("max %d:\n got %v\nwant %v", tc.max, got, tc.want)
		}
	}
}

// fakeDwell is a snapshot's scan as the collector reads it.
type fakeDwell struct {
	mu   sync.Mutex
	scan []state.StatusDwell
	err  error
}

func (f *fakeDwell) Dwell() ([]state.StatusDwell, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.scan, f.err
}

// gauges gathers reg into "name{status}" -> value.
func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "status" {
					key += "{" + l.GetValue() + "}"
				}
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestDwellCollector: nothing before the first scan; then the scan's
// counts, and ages measured at the scrape from the oldest entry; a failed
// scan keeps the last figures (their timestamp tells).
func TestDwellCollector(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	src := &fakeDwell{scan: []state.StatusDwell{dwellOf("", 1, "2026-11-26T11:00:00Z"), dwellOf("5", 3, "2026-11-24T12:00:00Z"), dwellOf("6", 1, "")}}
	c := newDwellCollector(src, clock)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if g := gauges(t, reg); len(g) != 0 {
		t.Fatalf("before the first scan: %v", g)
	}
	if err := c.refresh(); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"orderwatch_status_orders{none}": 1, "orderwatch_status_orders{5}": 3, "orderwatch_status_orders{6}": 1,
		"orderwatch_status_oldest_age_seconds{none}": 3600, "orderwatch_status_oldest_age_seconds{5}": 48 * 3600,
		"orderwatch_status_scan_duration_seconds":  0, // the fake clock stands still
		"orderwatch_status_scan_timestamp_seconds": float64(now.Unix()),
	}
	if g := gauges(t, reg); fmt.Sprint(g) != fmt.Sprint(want) {
		t.Errorf("after a scan:\n got %v\nwant %v", g, want)
	}
	now = now.Add(30 * time.Second) // a scrape between scans: ages grow
	if g := gauges(t, reg); g["orderwatch_status_oldest_age_seconds{5}"] != 48*3600+30 || g["orderwatch_status_orders{5}"] != 3 {
		t.Errorf("30 s later: %v", g)
	}
	src.mu.Lock()
	src.err = errors.New("disk")
	src.mu.Unlock()
	if err := c.refresh(); err == nil {
		t.Fatal("a failed scan reported no error")
	}
	if g := gauges(t, reg); g["orderwatch_status_orders{5}"] != 3 || g["orderwatch_status_scan_timestamp_seconds"] != float64(now.Add(-30*time.Second).Unix()) {
		t.Errorf("after a failed scan: %v; want the last figures", g)
	}
	// A status that empties leaves the metrics with the next scan.
	src.mu.Lock()
	src.scan, src.err = []state.StatusDwell{dwellOf("6", 2, "2026-11-26T11:59:00Z")}, nil
	src.mu.Unlock()
	if err := c.refresh(); err != nil {
		t.Fatal(err)
	}
	if g := gauges(t, reg); g["orderwatch_status_orders{6}"] != 2 || len(g) != 4 {
		t.Errorf("after status 5 emptied: %v", g)
	}
}

func TestParseListQuery(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for query, want := range map[string]string{
		"": "status=any before=0001-01-01T00:00:00Z after=0 limit=500",
		"status=5.10&olderThan=48h&after=17&limit=20": "status=5.1 before=2026-11-24T12:00:00Z after=17 limit=20",
		"status=none":             "status=none before=0001-01-01T00:00:00Z after=0 limit=500",
		"status=NONE&limit=10000": "status=none before=0001-01-01T00:00:00Z after=0 limit=10000",
		"olderThan=90m":           "status=any before=2026-11-26T10:30:00Z after=0 limit=500",
	} {
		q, err := ParseListQuery(mustQuery(t, query), now)
		if err != nil {
			t.Errorf("%q: %v", query, err)
			continue
		}
		status := "any"
		if q.Filter.Status != nil {
			status = q.Filter.Status.Canonical()
			if q.Filter.Status.IsZero() {
				status = "none"
			}
		}
		got := fmt.Sprintf("status=%s before=%s after=%d limit=%d", status, q.Filter.EnteredBefore.Format(time.RFC3339), q.Filter.AfterID, q.Limit)
		if got != want {
			t.Errorf("%q: %s, want %s", query, got, want)
		}
	}
	for _, query := range []string{
		"status=x", "status=", "olderThan=2d", "olderThan=-1h", "olderThan=0s", "after=-1", "after=x",
		"limit=0", "limit=10001", "limit=x", "olderthan=48h", "status=5&status=6",
	} {
		if _, err := ParseListQuery(mustQuery(t, query), now); err == nil {
			t.Errorf("%q accepted", query)
		}
	}
}

func mustQuery(t *testing.T, s string) url.Values {
	t.Helper()
	q, err := url.ParseQuery(s)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// stateDay is the day newStateWatcher's states are dated from: today's
// midnight (UTC), so that "older than 72h" picks the same orders whenever
// the test runs.
var stateDay = time.Now().UTC().Truncate(24 * time.Hour)

// newStateWatcher builds a watcher (its shop unreachable) whose snapshot
// holds states: a status 5 order per id in ids5 that entered 5 as many
// days before stateDay as its id, and one order 99 in 6.
func newStateWatcher(t *testing.T, natsURL string, lease bool, ids5 ...int64) *Watcher {
	t.Helper()
	cfg := testConfig(t, "http://127.0.0.1:1", natsURL)
	cfg.Lease = lease
	w, err := New(cfg, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	var puts []state.Put
	for _, id := range ids5 {
		since := stateDay.AddDate(0, 0, -int(id))
		puts = append(puts, state.Put{ID: id, State: diff.State{StatusID: order.MustDecimal("5"), LockStatus: "unlocked", TypeID: 1,
			UpdatedAt: order.Time{Time: stateDay}, StatusSince: order.Time{Time: since}}})
	}
	puts = append(puts, state.Put{ID: 99, State: diff.State{StatusID: order.MustDecimal("6"), UpdatedAt: order.Time{Time: stateDay.AddDate(0, 0, -1)}}})
	if err := w.store.Commit(state.Commit{States: puts}); err != nil {
		t.Fatal(err)
	}
	return w
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestOrderListEndpoint: GET /state/orders pages through the snapshot by
// status and time in it, with a cursor, in the shape documented.
func TestOrderListEndpoint(t *testing.T) {
	w := newStateWatcher(t, testnats.Start(t).ClientURL(), false, 1, 2, 3, 40, 50)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	base := w.HTTPURL()

	code, body := get(t, base+"/state/orders?status=5&olderThan=72h&limit=1")
	// Orders 3, 40 and 50 entered status 5 more than 3 days ago (1 and 2
	// not); a page of one.
	want := `{
  "orders": [
    {
      "orderId": 3,
      "statusSince": "` + stateDay.AddDate(0, 0, -3).Format(time.RFC3339) + `",
      "state": {
        "statusId": 5,
        "lockStatus": "unlocked",
        "typeId": 1,
        "referrerId": null,
        "plentyId": 0,
        "ownerId": null,
        "locationId": null,
        "createdAt": null,
        "updatedAt": "` + stateDay.Format(time.RFC3339) + `"
      }
    }
  ],
  "next": 3
}
`
	if code != http.StatusOK || body != want {
		t.Fatalf("first page: %d\n%s\nwant\n%s", code, body, want)
	}
	var ids []string
	after := "3"
	for after != "null" {
		code, body = get(t, base+"/state/orders?status=5&olderThan=72h&limit=1&after="+after)
		if code != http.StatusOK {
			t.Fatalf("after %s: %d %s", after, code, body)
		}
		for _, l := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), `"orderId": `); ok {
				ids = append(ids, strings.TrimSuffix(v, ","))
			}
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), `"next": `); ok {
				after = v
			}
		}
		if len(ids) > 10 {
			t.Fatalf("the cursor does not end: %v", ids)
		}
	}
	if strings.Join(ids, ",") != "40,50" {
		t.Errorf("the following pages hold %v, want 40,50", ids)
	}
	if code, body := get(t, base+"/state/orders?status=none"); code != http.StatusOK || body != "{\n  \"orders\": [],\n  \"next\": null\n}\n" {
		t.Errorf("no order without a status: %d %s", code, body)
	}
	if code, body := get(t, base+"/state/orders?olderthan=48h"); code != http.StatusBadRequest || !strings.Contains(body, "olderthan") {
		t.Errorf("a misspelt parameter: %d %s; want 400 naming it", code, body)
	}
	if code, body := get(t, base+"/state/orders/3"); code != http.StatusOK || !strings.Contains(body, `"statusSince": "`+stateDay.AddDate(0, 0, -3).Format(time.RFC3339)+`"`) {
		t.Errorf("one order: %d %s; want its statusSince", code, body)
	}
}

// TestDwellMetricsOnEveryReplica: Run refreshes the status metrics from
// the replica's own snapshot, on the active and on the standby.
func TestDwellMetricsOnEveryReplica(t *testing.T) {
	nats := testnats.Start(t).ClientURL()
	a := newStateWatcher(t, nats, true, 1, 2)
	b := newStateWatcher(t, nats, true, 1, 2, 3)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, w := range []*Watcher{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(ctx) }()
	}
	defer func() { cancel(); wg.Wait() }()
	metric := func(w *Watcher, name string) (float64, bool) {
		_, body := get(t, w.HTTPURL()+"/metrics")
		for _, l := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				var f float64
				_, err := fmt.Sscan(v, &f)
				return f, err == nil
			}
		}
		return 0, false
	}
	testnats.WaitFor(t, "the status metrics on both replicas, one of them active", 30*time.Second, func() bool {
		la, oka := metric(a, "orderwatch_leader")
		lb, okb := metric(b, "orderwatch_leader")
		na, _ := metric(a, `orderwatch_status_orders{status="5"}`)
		nb, _ := metric(b, `orderwatch_status_orders{status="5"}`)
		return oka && okb && la+lb == 1 && na == 2 && nb == 3
	})
	for _, w := range []*Watcher{a, b} {
		if age, ok := metric(w, `orderwatch_status_oldest_age_seconds{status="6"}`); !ok || age < time.Since(stateDay.AddDate(0, 0, -1)).Seconds()-60 {
			t.Errorf("age of status 6: %v %v", age, ok)
		}
	}
}
