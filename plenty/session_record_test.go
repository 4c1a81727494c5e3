package plenty_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/plentysim"
)

// TestLoginGuardRecordAbsurdWait (review): a "sessions" record that holds
// logins back for months (no length saved with it, or a length of months:
// a hand-edited or damaged file) holds them back no longer than the
// longest wait the guard itself ever sets (LoginBackoff).
func TestLoginGuardRecordAbsurdWait(t *testing.T) {
	for _, wait := range []time.Duration{0, 100 * 24 * time.Hour} {
		e := newEnv(t, plentysim.Config{})
		st := openState(t, filepath.Join(t.TempDir(), "state.db"))
		now := e.clk.Now()
		if err := st.SaveRecord(plenty.SessionsRecord, map[string]any{
			"not_before": now.Add(100 * 24 * time.Hour), "wait": wait, "reason": "session limit", "kind": "session_limit", "saved_at": now,
		}); err != nil {
			t.Fatal(err)
		}
		_, err := e.process(t, st, nil).SearchOrders(context.Background(), order.Query{})
		var held *plenty.LoginHeldError
		if errors.As(err, &held) && held.Until.Sub(now) > 5*time.Minute {
			t.Errorf("saved wait %v: logins held until %v, %v from now; want at most LoginBackoff (5 min)", wait, held.Until, held.Until.Sub(now))
		}
	}
}
