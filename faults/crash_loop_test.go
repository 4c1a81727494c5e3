package faults

import (
	"testing"
	"time"

	"github.com/orderwatch/orderwatch/plentysim"
)

// TestFaultBudgetCrashLoopInFirstSync: a first sync of a large shop (a
// daily limit of 4,000 calls, the default share of 0.25: 1,000 calls a
// day, a bucket of 41.7) cut by kill -9 every 15 s, eight processes on
// one state file. Each process finds what the ones before spent (the
// budget is charged and saved as the calls go out), so the sweeps after
// the first one's wait for the debt, and all processes together stay
// within one share of the day.
func TestFaultBudgetCrashLoopInFirstSync(t *testing.T) {
	const (
		limit = 4000
		share = 0.25
	)
	f := newFaultEnv(t, plentysim.Config{Limits: plentysim.Limits{LongLimit: limit}}, defaultConfig...)
	f.sim.Generate(60000, time.Now().Add(-29*24*time.Hour), time.Now().Add(-48*time.Hour))
	rec := f.recordCalls()
	var perProcess []int
	start := time.Now()
	for range 8 {
		born := time.Now()
		f.start()
		time.Sleep(15 * time.Second)
		f.kill()
		n, _ := rec.between(born, time.Now())
		perProcess = append(perProcess, n)
	}
	elapsed := time.Since(start)
	st := f.sim.Stats()
	bucket := share * limit / 24
	rest := st.Calls - perProcess[0]
	if float64(st.Calls) > share*limit {
		t.Errorf("8 processes killed every 15 s made %d calls in %v; one share of the day is %.0f", st.Calls, elapsed.Round(time.Second), share*limit)
	}
	if refill := share * limit * elapsed.Hours() / 24; float64(rest) > bucket+refill {
		t.Errorf("the 7 processes after the first made %d calls: the first one's debt and the refill (%.1f) allow none", rest, refill)
	}
	t.Logf("8 processes killed every 15 s in a first sync: %d calls in %v (per process %v; %d logins); one share of the day is %.0f, the bucket %.1f",
		st.Calls, elapsed.Round(time.Second), perProcess, st.LoginCalls, share*limit, bucket)
}
