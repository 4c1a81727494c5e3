package pipeline

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/internal/testnats"
)

// testConfig is a valid configuration for a shop at shopURL, NATS at
// natsURL and a state file in a temporary directory.
func testConfig(t *testing.T, shopURL, natsURL string) *Config {
	return &Config{
		PlentyURL: shopURL, PlentyUsername: "demo", PlentyPassword: "demo", PlentyAPIVendor: "service", PlentyTimeout: 10 * time.Second,
		NATSURL: natsURL, Stream: "ORDERS", StreamCreate: true, DuplicateWindow: 10 * time.Minute, StreamReplicas: 1,
		SubjectPrefix: "orders", PublishInFlight: 256, StatePath: filepath.Join(t.TempDir(), "state.db"), OutboxMax: 100000,
		PollInterval: time.Second, Settle: time.Second, Overlap: 5 * time.Second, StartFrom: StartFrom{Back: 24 * time.Hour},
		CallShare: 0.25, ItemsPerPage: 250, SlicePages: 4, Keyset: "auto", BadEntries: "quarantine",
		LeaseTTL: 9 * time.Second, LeaseBucket: "orderwatch",
		HTTPAddr: "127.0.0.1:0", LogFormat: "text", LogLevel: "error", ShutdownTimeout: 5 * time.Second,
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestReadinessDuringTakeoverRebuild: the readiness (/readyz) is read
// while a takeover rebuilds the client and the poller from a restored
// state file; under -race every read of the workers is synchronised with
// their replacement (it was not: the readiness read the client directly).
func TestReadinessDuringTakeoverRebuild(t *testing.T) {
	cfg := testConfig(t, "http://127.0.0.1:1", testnats.Start(t).ClientURL())
	w, err := New(cfg, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			if err := (hooks{w}).Restored(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 200 {
		if ok, why := Ready(w.status()); ok {
			t.Errorf("ready before any sweep: %s", why)
		}
	}
	wg.Wait()
}

// TestTwoWatchersOnOneRegistry: two pipelines (two shops) register their
// metrics on one registry, each wrapped with its shop label, without a
// collision; each series carries its shop. A closed pipeline leaves the
// registry: one for the same shop can be built again.
func TestTwoWatchersOnOneRegistry(t *testing.T) {
	nats := testnats.Start(t).ClientURL()
	reg := prometheus.NewRegistry()
	start := func(shop string) *Watcher {
		cfg := testConfig(t, "http://"+shop+".example", nats)
		cfg.Stream, cfg.SubjectPrefix = "ORDERS_"+shop, "orders_"+shop // two shops: a stream and a prefix each
		cfg.Lease = true                                               // the hot standby's metrics too
		w, err := New(cfg, Options{Logger: quiet(), Registerer: prometheus.WrapRegistererWith(prometheus.Labels{"shop": shop}, reg), Gatherer: reg})
		if err != nil {
			t.Fatalf("shop %s: %v", shop, err)
		}
		return w
	}
	start("a").Close()
	for _, shop := range []string{"a", "b"} {
		defer start(shop).Close()
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	shops := map[string][]string{} // metric -> shop labels
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "shop" {
					shops[mf.GetName()] = append(shops[mf.GetName()], l.GetValue())
				}
			}
		}
	}
	for _, name := range []string{"orderwatch_outbox_depth", "orderwatch_leader", "orderwatch_settle_seconds", "orderwatch_takeovers_total"} {
		if got := strings.Join(shops[name], ","); got != "a,b" {
			t.Errorf("%s: series of shops %q, want a,b", name, got)
		}
	}
}
