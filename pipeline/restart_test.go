package pipeline

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plentysim"
)

// TestStartWaitsForTheLastRunsLoops: a stop whose sweep outlives the
// shutdown timeout (its request to the shop, which a sweep finishes even
// when stopped, is held by the shop) returns without waiting for it; a
// start after that stop begins no loop until the old run's loops have
// ended, so two runs of one poller never overlap (they did: a data race
// on the poller when a paused fleet member's replica started again). The
// shop never has two requests at once, and the new run calls it once the
// old request was answered.
func TestStartWaitsForTheLastRunsLoops(t *testing.T) {
	sim := plentysim.New(plentysim.Config{Seed: 3})
	var mu sync.Mutex
	requests, inFlight, maxInFlight := 0, 0, 0
	held, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unhold := func() { releaseOnce.Do(func() { close(release) }) }
	shop := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests++
		inFlight++
		maxInFlight = max(maxInFlight, inFlight)
		first := requests == 1
		mu.Unlock()
		if first {
			close(held)
			<-release
		}
		sim.ServeHTTP(rw, r)
		mu.Lock()
		inFlight--
		mu.Unlock()
	}))
	defer shop.Close()
	defer unhold()
	count := func() (n, most int) {
		mu.Lock()
		defer mu.Unlock()
		return requests, maxInFlight
	}

	cfg := testConfig(t, shop.URL, testnats.Start(t).ClientURL())
	cfg.ShutdownTimeout = 50 * time.Millisecond // the held request outlives it
	cfg.PlentyTimeout = time.Minute
	w, err := New(cfg, Options{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	stop := w.start(t.Context())
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the sweep made no request")
	}
	stop(false) // returns after the shutdown timeout, the request still held

	started := make(chan func(bool) int, 1)
	go func() { started <- w.start(t.Context()) }()
	// A start that does not wait for the last run's loops returns at once:
	// a second is the window in which it must not.
	select {
	case stop := <-started:
		unhold()
		stop(false)
		t.Fatal("a start returned while the last run's sweep was still in its request")
	case <-time.After(time.Second):
	}
	if n, _ := count(); n != 1 {
		t.Errorf("%d requests to the shop while the last run's was held, want 1", n)
	}
	unhold()
	var stop2 func(bool) int
	select {
	case stop2 = <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the start did not go on after the last run's loops ended")
	}
	defer stop2(false)
	testnats.WaitFor(t, "the new run's first request", 30*time.Second, func() bool { n, _ := count(); return n > 1 })
	if _, most := count(); most > 1 {
		t.Errorf("%d requests to the shop at once: two runs overlapped", most)
	}
}
