package main

import (
	"strings"
	"testing"
	"time"
)

func TestConfigLease(t *testing.T) {
	setBase(t)
	c, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !c.Lease || c.LeaseTTL != 9*time.Second || c.LeaseBucket != "orderwatch" || c.InstanceID != "" {
		t.Errorf("lease defaults: on %v, ttl %v, bucket %q, instance %q", c.Lease, c.LeaseTTL, c.LeaseBucket, c.InstanceID)
	}
	for name, val := range map[string]string{"WATCHER_LEASE_TTL": "1s", "WATCHER_LEASE_BUCKET": "a.b"} {
		t.Run(name, func(t *testing.T) {
			setBase(t)
			t.Setenv(name, val)
			if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%s: %v, want an error naming it", name, val, err)
			}
		})
	}
	// Core NATS mode has no lease: its settings are not checked.
	setBase(t)
	t.Setenv("WATCHER_STREAM", "")
	t.Setenv("WATCHER_LEASE_TTL", "1s")
	if _, err := LoadConfig(); err != nil {
		t.Errorf("core NATS mode with a short lease TTL: %v", err)
	}
}
