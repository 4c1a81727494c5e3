package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/schemas"
)

// labelledEvent is what these tests read of an event.
type labelledEvent struct {
	Type string `json:"type"`
	Data struct {
		OrderID int64                                `json:"orderId"`
		Order   map[string]json.RawMessage           `json:"order"`
		Labels  map[string]map[string]map[string]any `json:"labels"`
	} `json:"data"`
}

// TestEndToEndLabels runs the binary with WATCHER_WITH against orders whose
// relations carry known codes, unknown codes, malformed shapes and nothing,
// and reads every event from the stream: each is published, validates, and
// names exactly the known codes.
func TestEndToEndLabels(t *testing.T) {
	bin := e2e.Watcher(t)
	sim := plentysim.New(plentysim.Config{Seed: 42})
	base := time.Now().Add(-time.Hour)
	known := sim.AddOrder(plentysim.Order{CreatedAt: base, UpdatedAt: base,
		Addresses: []plentysim.Address{{ID: 1, TypeID: 1, CountryID: 255}, {ID: 2, TypeID: 2, CountryID: 12}},
		Amounts:   []plentysim.Amount{{Currency: "EUR", IsSystemCurrency: true, GrossCents: 1000}, {Currency: "GBP", ExchangeRate: "0.86", GrossCents: 860}},
		Payments:  []plentysim.Payment{{ID: 1, MopID: 6000, Status: 9, Currency: "GBP", AmountCents: 860}},
	})
	unknown := sim.AddOrder(plentysim.Order{CreatedAt: base, UpdatedAt: base,
		Addresses: []plentysim.Address{{ID: 3, CountryID: 111}, {ID: 4, CountryID: 1}},
		Amounts:   []plentysim.Amount{{Currency: "XXX"}},
		Payments:  []plentysim.Payment{{ID: 2, Status: 42, Currency: "ABC"}},
	})
	malformed := sim.AddOrder(plentysim.Order{CreatedAt: base, UpdatedAt: base, Raw: map[string]string{
		"addresses":  `"DE"`,
		"amounts":    `[1,"EUR",null,{"currency":{"code":"EUR"}}]`,
		"payments":   `{"status":{"id":3},"currency":["EUR"]}`,
		"orderItems": `[{"amounts":"EUR"},[{"amounts":[{"currency":"CHF"}]}]]`,
	}})
	absent := sim.AddOrder(plentysim.Order{CreatedAt: base, UpdatedAt: base, Raw: map[string]string{"addresses": "null"}})
	srv := httpServer(t, sim)
	ns := testnats.Start(t)
	addr := e2e.FreeAddr(t)

	// The service's default limits; short delays so the test ends in seconds.
	cmd := exec.Command(bin, "run")
	cmd.Env = append(e2e.CleanEnv(),
		"WATCHER_PLENTY_URL="+srv, "WATCHER_PLENTY_USERNAME=demo", "WATCHER_PLENTY_PASSWORD=demo",
		"WATCHER_NATS_URL="+ns.ClientURL(), "WATCHER_STATE_PATH="+filepath.Join(t.TempDir(), "state.db"),
		"WATCHER_POLL_INTERVAL=500ms", "WATCHER_SETTLE=1s", "WATCHER_OVERLAP=5s", "WATCHER_HTTP_ADDR="+addr,
		"WATCHER_SHUTDOWN_TIMEOUT=5s",
		"WATCHER_BASELINE_EVENTS=true", // every order of the first sweep becomes an event
		"WATCHER_WITH=addresses,amounts,payments",
	)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()

	events := readEvents(t, ns.ClientURL(), 4, 30*time.Second)
	want := map[int64]string{
		known.ID: `{"countries":{"12":{"iso":"GB"},"255":{"iso":"DE","name":"Helgoland","territory":true}},` +
			`"currencies":{"EUR":{"code":"EUR","name":"Euro"},"GBP":{"code":"GBP","name":"Pound Sterling"}},` +
			`"paymentStatuses":{"9":{"name":"Refunded"}}}`,
		unknown.ID:   `{"countries":{"1":{"iso":"DE"}}}`,
		malformed.ID: `null`,
		absent.ID:    `null`,
	}
	for id, w := range want {
		ev, ok := events[id]
		if !ok {
			t.Errorf("order %d: no event", id)
			continue
		}
		if got, _ := json.Marshal(ev.Data.Labels); string(got) != w {
			t.Errorf("order %d: labels %s\nwant %s", id, got, w)
		}
	}
	// The values stay as sent.
	if ev := events[unknown.ID]; string(ev.Data.Order["payments"]) != `[{"id":2,"amount":0.00,"mopId":0,"status":42,"currency":"ABC","isSystemCurrency":false}]` {
		t.Errorf("order %d: payments %s", unknown.ID, ev.Data.Order["payments"])
	}
	if ev := events[malformed.ID]; string(ev.Data.Order["addresses"]) != `"DE"` {
		t.Errorf("order %d: addresses %s", malformed.ID, ev.Data.Order["addresses"])
	}
}

// TestDemoEventsCarryLabels: the demo loads relations (WATCHER_WITH), so the
// events a newcomer watches on the stream name countries, currencies and
// payment statuses.
func TestDemoEventsCarryLabels(t *testing.T) {
	lines := startDemo(t)
	natsURL := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`NATS\s+(nats://\S+)`)
		for l := range lines {
			if m := re.FindStringSubmatch(l); m != nil {
				select {
				case natsURL <- m[1]:
				default:
				}
			}
		}
	}()
	var url string
	select {
	case url = <-natsURL:
	case <-time.After(30 * time.Second):
		t.Fatal("the demo did not print its NATS URL")
	}
	for _, ev := range readEvents(t, url, 1, 30*time.Second) {
		if len(ev.Data.Labels["countries"]) == 0 || len(ev.Data.Labels["currencies"]) == 0 {
			t.Errorf("demo event %s of order %d without country and currency labels: %v", ev.Type, ev.Data.OrderID, ev.Data.Labels)
		}
		if ev.Data.Order["addresses"] == nil || ev.Data.Order["amounts"] == nil || ev.Data.Order["payments"] == nil {
			b, _ := json.Marshal(ev.Data.Order)
			t.Errorf("demo event of order %d without the relations: %s", ev.Data.OrderID, b)
		}
	}
}

// readEvents reads n events from the stream ORDERS, checking each against
// its schema, and returns them by order id.
func readEvents(t *testing.T, url string, n int, limit time.Duration) map[int64]labelledEvent {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var cons jetstream.Consumer
	for cons == nil { // the watcher creates the stream when it starts
		cons, err = js.OrderedConsumer(ctx, "ORDERS", jetstream.OrderedConsumerConfig{})
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("no stream ORDERS: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	out := map[int64]labelledEvent{}
	for len(out) < n {
		msg, err := cons.Next(jetstream.FetchContext(ctx))
		if err != nil {
			t.Fatalf("waiting for events (have %d of %d): %v", len(out), n, err)
		}
		if err := schemas.Validate(msg.Data()); err != nil {
			t.Errorf("event on %s does not validate: %v\n%s", msg.Subject(), err, msg.Data())
		}
		var ev labelledEvent
		if err := json.Unmarshal(msg.Data(), &ev); err != nil {
			t.Fatalf("event on %s: %v", msg.Subject(), err)
		}
		out[ev.Data.OrderID] = ev
	}
	return out
}

// httpServer serves the simulator on loopback for the test's lifetime.
func httpServer(t *testing.T, sim *plentysim.Server) string {
	t.Helper()
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return srv.URL
}
