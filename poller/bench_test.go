package poller

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/state"
)

// benchPages returns the raw search pages (250 orders each) of a simulated
// shop of n orders, three times: as generated, with changed of them moved
// to status 8, and with those moved back (same updatedAt second). extra is
// added to the query (e.g. "&with=addresses").
func benchPages(b *testing.B, n, changed int, extra string) (base, there, back [][]byte) {
	b.Helper()
	t := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	sim := plentysim.New(plentysim.Config{Now: func() time.Time { return t }, Seed: 5,
		Limits: plentysim.Limits{ShortLimit: 1 << 30, LongLimit: 1 << 30}})
	sim.Generate(n, t.Add(-30*24*time.Hour), t.Add(-time.Hour))
	srv := httptest.NewServer(sim)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/rest/login", "application/json", strings.NewReader(`{"username":"demo","password":"demo"}`))
	if err != nil {
		b.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	fetch := func() [][]byte {
		var pages [][]byte
		for p := 1; p <= (n+249)/250; p++ {
			req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/rest/orders/search?sortBy=orderId&sortOrder=asc&itemsPerPage=250&page=%d%s", srv.URL, p, extra), nil)
			req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			pages = append(pages, body)
		}
		return pages
	}
	orders := sim.Orders()
	step := n / max(changed, 1)
	var old []string
	base = fetch()
	for i := 0; i < changed; i++ {
		o := orders[i*step]
		old = append(old, o.StatusID)
		next := "8"
		if o.StatusID == "8" {
			next = "9"
		}
		sim.SetStatus(o.ID, next)
	}
	there = fetch()
	for i := 0; i < changed; i++ {
		sim.SetStatus(orders[i*step].ID, old[i])
	}
	back = fetch()
	return base, there, back
}

// benchmarkPipeline measures what the sweep does with each page: decode,
// look up the snapshot, diff, and commit states + events in one fsynced
// transaction.
func benchmarkPipeline(b *testing.B, changedPct int, extra string) {
	const n = 100_000
	base, there, back := benchPages(b, n, n*changedPct/100, extra)
	store, err := state.Open(filepath.Join(b.TempDir(), "state.db"), state.Options{NoSync: os.Getenv("BENCH_NOSYNC") != ""})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	p, err := New(nil, store, Config{StartFrom: time.Now(), Source: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	s := &sweep{p: p, st: &Stats{Events: map[diff.Type]int{}}, baseline: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), stop: context.Background()}
	hi := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	pages := 0
	process := func(body []byte) int {
		page, err := order.DecodePage(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := s.add(page.Orders, hi); err != nil {
			b.Fatal(err)
		}
		if pages++; pages%4 == 0 { // a slice of four pages: one transaction
			if err := s.flush(nil); err != nil {
				b.Fatal(err)
			}
		}
		return len(page.Orders)
	}
	for _, body := range base {
		process(body)
	}
	sets := [][][]byte{there, back}
	s.st.Events = map[diff.Type]int{}
	b.ReportAllocs()
	b.ResetTimer()
	orders := 0
	for i := 0; i < b.N; i++ {
		pages := sets[(i/len(there))%2]
		orders += process(pages[i%len(pages)])
	}
	b.StopTimer()
	b.ReportMetric(float64(orders)/b.Elapsed().Seconds(), "orders/s")
	b.ReportMetric(float64(s.st.EventCount())/float64(orders), "events/order")
}

func BenchmarkPipeline1PctChanged(b *testing.B)   { benchmarkPipeline(b, 1, "") }
func BenchmarkPipeline100PctChanged(b *testing.B) { benchmarkPipeline(b, 100, "") }

// The same with the relations the demo loads: every event names countries,
// currencies and payment statuses (data.labels).
func BenchmarkPipeline100PctChangedWithRelations(b *testing.B) {
	benchmarkPipeline(b, 100, "&with=addresses,amounts,payments")
}

// syntheticPage renders page p (250 orders from id 1000+250p) in the
// service's shape; status shifts with round so every round changes 1%.
func syntheticPage(dst []byte, p, round int) []byte {
	dst = append(dst[:0], `{"page":1,"totalsCount":250,"isLastPage":true,"lastPageNumber":1,"firstOnPage":1,"lastOnPage":250,"itemsPerPage":250,"entries":[`...)
	for i := range 250 {
		id := 1000 + 250*p + i
		status := 5
		if id%100 == 0 {
			status = 5 + round%2
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = fmt.Appendf(dst, `{"id":%d,"referrerId":1,"roundTotalsOnly":true,"numberOfDecimals":2,"plentyId":41523,"typeId":1,"lockStatus":"unlocked","locationId":"1","createdAt":"2026-11-20T09:14:03+01:00","updatedAt":"2026-11-22T10:02:%02d+01:00","statusId":%d,"ownerId":"3"}`, id, 10+round, status)
	}
	return append(dst, "]}"...)
}

// BenchmarkHeapMillionOrders sweeps a snapshot of 1,000,000 orders page by
// page (one transaction per four pages, fsync on) and reports the largest
// Go heap seen: the snapshot lives in the bbolt file, not in the heap.
func BenchmarkHeapMillionOrders(b *testing.B) {
	const pages = 4000 // 1,000,000 orders
	store, err := state.Open(filepath.Join(b.TempDir(), "state.db"), state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	p, err := New(nil, store, Config{StartFrom: time.Now(), Source: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	s := &sweep{p: p, st: &Stats{Events: map[diff.Type]int{}}, baseline: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), stop: context.Background()}
	hi := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	var body []byte
	var peak uint64
	var ms runtime.MemStats
	sweepAll := func(round int) {
		for pg := range pages {
			body = syntheticPage(body, pg, round)
			page, err := order.DecodePage(body)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.add(page.Orders, hi); err != nil {
				b.Fatal(err)
			}
			if pg%4 == 3 {
				if err := s.flush(nil); err != nil {
					b.Fatal(err)
				}
			}
			if pg%200 == 0 {
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
	}
	sweepAll(0) // the baseline: 1,000,000 orders into the snapshot
	peak = 0
	b.ResetTimer()
	for i := range b.N {
		sweepAll(i + 1)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-after-gc-MiB")
	b.ReportMetric(float64(pages*250*b.N)/b.Elapsed().Seconds(), "orders/s")
	if st, err := store.Stats(); err == nil {
		b.ReportMetric(float64(st.FileSize)/float64(st.Orders), "file-bytes/order")
	}
}
