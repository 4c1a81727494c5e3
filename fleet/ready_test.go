package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plentysim"
)

// TestMemberReadyWhileAShopWaitsOutItsQuota: one shop's daily quota is
// spent: that shop is not ready (its own /shops/<id>/readyz), the member
// is (before: 503 for the whole member, which with the disruption budget
// blocks a node drain for a day).
func TestMemberReadyWhileAShopWaitsOutItsQuota(t *testing.T) {
	w := newWorld(t, 2)
	m0 := w.start("m0")
	waitStable(t, []*member{m0}, 2, 60*time.Second)
	w.sim.Tenant("shop-001").SetLimits(plentysim.Limits{LongLimit: 1})
	testnats.WaitForEvery(t, "shop-001 paused for its daily quota", 60*time.Second, 100*time.Millisecond, func() bool {
		for _, s := range m0.f.Report().Shops {
			if s.ID == "shop-001" && s.Ready != nil && !*s.Ready && strings.Contains(s.Reason, "quota") {
				return true
			}
		}
		return false
	})
	rep := m0.f.Report()
	if !rep.Ready || len(rep.Waiting) != 1 || !strings.HasPrefix(rep.Waiting[0], "shop-001: ") {
		t.Errorf("member ready %v (%s), waiting %q; want ready with shop-001 waiting", rep.Ready, rep.Why, rep.Waiting)
	}
}
