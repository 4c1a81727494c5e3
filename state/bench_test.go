package state

import (
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/diff"
)

// benchPayload is about the size of an encoded CloudEvent.
var benchPayload = make([]byte, 1400)

// BenchmarkCommitPage commits pages as a sweep does: 250 states (new orders,
// ascending ids) and 3 outbox events per Commit, fsync on.
func BenchmarkCommitPage(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ps := make([]Put, 250)
	evs := make([]OutboxEntry, 3)
	for i := range evs {
		evs[i] = OutboxEntry{ID: "0123456789abcdef0123456789abcdef", Subject: "orders.status_changed.5.6.123456", Payload: benchPayload}
	}
	id := int64(0)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		for i := range ps {
			id++
			ps[i] = Put{ID: id, State: typical(id)}
		}
		if err := s.Commit(Commit{States: ps, Events: evs}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(id)/b.Elapsed().Seconds(), "orders/s")
}

// BenchmarkCommitPageUpdates commits 250 updates of existing orders spread
// over a store of 100,000 (a rescan or a bulk status change), fsync on.
func BenchmarkCommitPageUpdates(b *testing.B) {
	const n = 100_000
	path := filepath.Join(b.TempDir(), "state.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	fill(b, s, n)
	_ = s.Close()
	if s, err = Open(path, Options{}); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	ps := make([]Put, 250)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := 1 + rng.Int64N(n-1000)
		for i := range ps {
			id := start + int64(i)*4
			st := typical(id + 1) // another status, lock and updatedAt
			ps[i] = Put{ID: id, State: st}
		}
		if err := s.Commit(Commit{States: ps}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(250*b.N)/b.Elapsed().Seconds(), "orders/s")
}

// BenchmarkLookup reads the previous states of a page: 250 ids (ascending, as
// a page sorted by orderId, some unknown) per View, from a store of 100,000
// orders.
func BenchmarkLookup(b *testing.B) {
	const n = 100_000
	s, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fill(b, s, n)
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int64, 250)
	out := make([]*diff.State, 250)
	found := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := 1 + rng.Int64N(n)
		for i := range ids {
			ids[i] = start + int64(i)*int64(1+i%3) // runs past n now and then: unknown ids
		}
		if err := s.Lookup(ids, out); err != nil {
			b.Fatal(err)
		}
		for _, o := range out {
			if o != nil {
				found++
			}
		}
	}
	b.ReportMetric(float64(250*b.N)/b.Elapsed().Seconds(), "lookups/s")
	b.ReportMetric(float64(found)/float64(250*b.N), "found/lookup")
}

// BenchmarkStateFileSize inserts 1,000,000 orders in commits of 250 (NoSync)
// and reports the file's bytes per order (must stay below 100) and the Go
// heap in use afterwards (the snapshot lives in the file's mapping, not in
// the heap). Run it with -benchtime=1x.
func BenchmarkStateFileSize(b *testing.B) {
	const n = 1_000_000
	for b.Loop() {
		s, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{NoSync: true})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		perOrder := fill(b, s, n)
		elapsed := time.Since(start)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st, err := s.Stats()
		if err != nil {
			b.Fatal(err)
		}
		if st.Orders != n {
			b.Fatalf("%d orders in the file, want %d", st.Orders, n)
		}
		b.ReportMetric(perOrder, "bytes/order")
		b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-inuse-MiB")
		b.ReportMetric(float64(st.FileSize)/(1<<20), "file-MiB")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "orders/s")
		if perOrder >= 100 {
			b.Errorf("%.1f bytes per order, want < 100", perOrder)
		}
		_ = s.Close()
	}
}

// BenchmarkDwell1M scans a snapshot of 1,000,000 orders for the dwell
// metrics (Store.Dwell: orders and the oldest statusSince per status), as
// the watcher does every minute; half of the orders entered their status
// before their last update (a statusSince of their own). Run it with
// -benchtime=10x: filling the file takes a while.
func BenchmarkDwell1M(b *testing.B) {
	const n = 1_000_000
	s, err := Open(filepath.Join(b.TempDir(), "state.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ps := make([]Put, 0, 1000)
	for id := int64(1); id <= n; id++ {
		st := typical(id)
		if id%2 == 0 {
			st.StatusSince.Time = st.UpdatedAt.Add(-time.Duration(id%86400) * time.Second)
		}
		ps = append(ps, Put{ID: id, State: st})
		if len(ps) == cap(ps) || id == n {
			if err := s.Commit(Commit{States: ps}); err != nil {
				b.Fatal(err)
			}
			ps = ps[:0]
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		d, err := s.Dwell()
		if err != nil {
			b.Fatal(err)
		}
		total := 0
		for _, x := range d {
			total += x.Orders
		}
		if total != n {
			b.Fatalf("%d orders counted, want %d", total, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/scan")
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "orders/s")
	if st, err := s.Stats(); err == nil {
		b.ReportMetric(float64(st.FileSize)/n, "file-bytes/order")
	}
}
