package main

import (
	"io"
	"log/slog"
	"sync"
	"testing"
)

// TestReadinessDuringTakeoverRebuild: /readyz (the readiness) is asked
// while a takeover rebuilds the client and the poller from a restored
// state file; under -race, every read of the workers must be synchronised
// with their replacement.
func TestReadinessDuringTakeoverRebuild(t *testing.T) {
	newSessionEnv(t)
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Lease = false
	d, err := newDaemon(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			if err := d.newWorkers(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 200 {
		if ok, why := d.ready(); ok {
			t.Errorf("ready before any sweep: %s", why)
		}
	}
	wg.Wait()
}
