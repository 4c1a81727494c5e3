package pipeline

import (
	"context"
	"testing"
	"time"
)

// yieldReturns runs h.yield(ctx) and says whether it returned within
// limit (a liveness bound, far above yieldMax).
func yieldReturns(h *Host, ctx context.Context, limit time.Duration) bool {
	done := make(chan struct{})
	go func() { defer close(done); h.yield(ctx) }()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		return false
	}
}

// TestYieldNeverHoldsASweepForGood: restores that never end (takeovers
// stuck until their TakeoverLimit, then tried again, and so on), yieldFrom
// of them at once, hold each next sweep yieldMax at most, not for good.
func TestYieldNeverHoldsASweepForGood(t *testing.T) {
	h := &Host{takeovers: make(chan struct{}, 16)}
	for range yieldFrom {
		h.takeovers <- struct{}{}
	}
	if !yieldReturns(h, context.Background(), 10*yieldMax) {
		t.Fatal("a sweep held for good by restores that never end")
	}
}
