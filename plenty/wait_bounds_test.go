package plenty

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestWaitRestoredResetBeforeDate (review): a 429 whose period's
// -Calls-Reset lies before the answer's Date (a Date that runs ahead of
// the node that counts the calls, a reset just passed) binds the process
// that got it for what it announced; a process restarted 4 s into the wait
// must be bound for the rest of it, not freed at once.
func TestWaitRestoredResetBeforeDate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retryAfter string // "" = none
		decay      string // "" = none
	}{
		{"Retry-After 40", "40", ""},
		{"no Retry-After, Decay 30", "", "30"},
		{"no Retry-After, no Decay", "", ""}, // the default block
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
			server := now.Add(2 * time.Hour) // the Date runs two hours ahead
			h := http.Header{}
			h.Set("Date", server.Format(http.TimeFormat))
			h.Set(PrefixShort+"-Limit", "200")
			h.Set(PrefixShort+"-Calls-Left", "0")
			if tc.decay != "" {
				h.Set(PrefixShort+"-Decay", tc.decay)
			}
			h.Set(PrefixShort+"-Calls-Reset", strconv.FormatInt(now.Add(30*time.Second).Unix(), 10)) // true clock
			if tc.retryAfter != "" {
				h.Set("Retry-After", tc.retryAfter)
			}
			var told []Wait
			p := NewPacer(PacerConfig{Now: func() time.Time { return now }, OnWait: func(w Wait) { told = append(told, w) }})
			p.Observe(http.StatusTooManyRequests, ParseThrottle(h, now))
			inProcess := p.NotBefore().Sub(now)
			if len(told) != 1 {
				t.Fatalf("OnWait told %d times; want once", len(told))
			}
			raw, _ := json.Marshal(told)
			var saved []Wait
			if err := json.Unmarshal(raw, &saved); err != nil {
				t.Fatal(err)
			}
			later := now.Add(4 * time.Second)
			p2 := NewPacer(PacerConfig{Now: func() time.Time { return later }})
			w, ok := p2.Restore(saved...)
			if !ok {
				t.Fatalf("restored no wait 4 s into a wait of %v: the new process calls into it", inProcess)
			}
			if got := w.Until.Sub(later); got != inProcess-4*time.Second {
				t.Errorf("restored wait has %v left; the process that got the 429 waits %v more", got, inProcess-4*time.Second)
			}
		})
	}
}

// TestHugeRetryAfterCappedByReset (review): a 429 asking for days while its
// period resets (by the service's own clock) within the hour binds the
// process that got it as it binds a restarted one: to a minute past the
// reset, never for days (issue 18.4).
func TestHugeRetryAfterCappedByReset(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	server := now.Add(-5 * time.Minute) // the service's clock, a little behind
	h := http.Header{}
	h.Set("Date", server.Format(http.TimeFormat))
	h.Set(PrefixLong+"-Limit", "166000")
	h.Set(PrefixLong+"-Calls-Left", "0")
	h.Set(PrefixLong+"-Calls-Reset", strconv.FormatInt(server.Add(time.Hour).Unix(), 10))
	h.Set("Retry-After", strconv.Itoa(3*24*3600))
	var told []Wait
	p := NewPacer(PacerConfig{Now: func() time.Time { return now }, OnWait: func(w Wait) { told = append(told, w) }})
	p.Observe(http.StatusTooManyRequests, ParseThrottle(h, now))
	limit := time.Hour + time.Minute
	if got := p.NotBefore().Sub(now); got > limit {
		t.Errorf("the process that got the 429 waits %v; want at most %v (a minute past the reset)", got, limit)
	}
	p2 := NewPacer(PacerConfig{Now: func() time.Time { return now }})
	if w, ok := p2.Restore(told...); !ok || !w.Until.Equal(p.NotBefore()) {
		t.Errorf("a process restarted at once waits until %v (%v); the one that got the 429 until %v", w.Until, ok, p.NotBefore())
	}
}

// TestWaitNeverLongerThanADay (review): no period of the service is longer
// than a day, so no wait it asks for ends later than a day (and a minute)
// after it was asked, whatever a header says: a Retry-After of days that
// names no reset, a long period's -Decay of months. One bad header must
// not silence the watcher for days, in the process that got it or in a
// restarted one.
func TestWaitNeverLongerThanADay(t *testing.T) {
	const most = 24*time.Hour + time.Minute
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		status int
		hdr    map[string]string
	}{
		{"Retry-After of 3 days, no reset", http.StatusTooManyRequests, map[string]string{"Retry-After": strconv.Itoa(3 * 24 * 3600)}},
		{"long -Decay of months at the reserve", http.StatusOK, map[string]string{
			PrefixLong + "-Limit": "166000", PrefixLong + "-Calls-Left": "0", PrefixLong + "-Decay": "9999999"}},
		{"429 with a long -Decay of months", http.StatusTooManyRequests, map[string]string{
			PrefixLong + "-Limit": "166000", PrefixLong + "-Calls-Left": "0", PrefixLong + "-Decay": "9999999"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			h.Set("Date", now.Format(http.TimeFormat))
			for k, v := range tc.hdr {
				h.Set(k, v)
			}
			var told []Wait
			p := NewPacer(PacerConfig{Now: func() time.Time { return now }, OnWait: func(w Wait) { told = append(told, w) }})
			p.Observe(tc.status, ParseThrottle(h, now))
			if got := p.NotBefore().Sub(now); got <= 0 || got > most {
				t.Errorf("waits %v; want a wait of at most %v", got, most)
			}
			p2 := NewPacer(PacerConfig{Now: func() time.Time { return now.Add(time.Second) }})
			if w, ok := p2.Restore(told...); !ok || w.Until.Sub(now) > most {
				t.Errorf("restarted a second later: waits until %v (%v); want at most %v after the answer", w.Until, ok, most)
			}
		})
	}
}

// TestWaitOfTheLatestExhaustedPeriod (review): a 429 with two periods
// spent (another integration used up the user's short period and the
// day) asks, with Retry-After, for the wait until the later reset (the
// day's). The wait is bound to that reset, not to the short period's: the
// process that got the 429 and a restarted one both wait for the day,
// told once.
func TestWaitOfTheLatestExhaustedPeriod(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	day := 23 * time.Hour
	h := http.Header{}
	h.Set("Date", now.Format(http.TimeFormat))
	h.Set(PrefixShort+"-Limit", "200")
	h.Set(PrefixShort+"-Calls-Left", "0")
	h.Set(PrefixShort+"-Decay", "20")
	h.Set(PrefixShort+"-Calls-Reset", strconv.FormatInt(now.Add(20*time.Second).Unix(), 10))
	h.Set(PrefixLong+"-Limit", "166000")
	h.Set(PrefixLong+"-Calls-Left", "0")
	h.Set(PrefixLong+"-Decay", strconv.Itoa(int(day.Seconds())))
	h.Set(PrefixLong+"-Calls-Reset", strconv.FormatInt(now.Add(day).Unix(), 10))
	h.Set("Retry-After", strconv.Itoa(int(day.Seconds())))
	var blocks int
	var told []Wait
	p := NewPacer(PacerConfig{Now: func() time.Time { return now }, OnBlock: func(time.Time, string) { blocks++ },
		OnWait: func(w Wait) { told = append(told, w) }})
	p.Observe(http.StatusTooManyRequests, ParseThrottle(h, now))
	if got := p.NotBefore().Sub(now); got < day {
		t.Errorf("waits %v; want the day's %v", got, day)
	}
	if blocks != 1 {
		t.Errorf("OnBlock told %d times; want once", blocks)
	}
	// Only the 429's own wait persisted (as if the proactive block had
	// not followed): a restart 10 s later still waits for the day.
	p2 := NewPacer(PacerConfig{Now: func() time.Time { return now.Add(10 * time.Second) }})
	if w, ok := p2.Restore(told[0]); !ok || w.Until.Sub(now) < day {
		t.Errorf("restarted 10 s later: waits until %v (%v); want the day's reset", w.Until, ok)
	}
}

// TestWaitFarResetNoOverflow (review): a -Calls-Reset in the far future
// (the parser accepts up to 1e11, the year 5138) is farther than a
// time.Duration reaches; a minute added to it must not wrap to a negative
// wait that frees the caller at once, in the process that got the 429 or
// in a restarted one.
func TestWaitFarResetNoOverflow(t *testing.T) {
	now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Date", now.Format(http.TimeFormat))
	h.Set(PrefixShort+"-Limit", "200")
	h.Set(PrefixShort+"-Calls-Left", "0")
	h.Set(PrefixShort+"-Calls-Reset", "99999999999")
	h.Set("Retry-After", "40")
	var told []Wait
	p := NewPacer(PacerConfig{Now: func() time.Time { return now }, OnWait: func(w Wait) { told = append(told, w) }})
	p.Observe(http.StatusTooManyRequests, ParseThrottle(h, now))
	if got := p.NotBefore().Sub(now); got < 40*time.Second {
		t.Errorf("waits %v; want the 40 s of the Retry-After", got)
	}
	p2 := NewPacer(PacerConfig{Now: func() time.Time { return now.Add(4 * time.Second) }})
	if w, ok := p2.Restore(told...); !ok || w.Until.Sub(now) < 40*time.Second {
		t.Errorf("restarted 4 s later: waits until %v (%v); want the rest of the 40 s", w.Until, ok)
	}
}

// TestDateAheadNeverShortensADailyQuotaWait (issue 28): a 429 of the
// spent daily quota that names its reset by -Calls-Reset (the true clock)
// and no -Decay, with a Date two hours ahead: the wait lasts the 9 hours
// announced, in the process that got it and in one restarted an hour
// later, not the 7 hours between the Date and the reset.
func TestDateAheadNeverShortensADailyQuotaWait(t *testing.T) {
	for _, retryAfter := range []string{"32400", ""} {
		t.Run("Retry-After="+retryAfter, func(t *testing.T) {
			now := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
			h := http.Header{}
			h.Set("Date", now.Add(2*time.Hour).Format(http.TimeFormat)) // runs two hours ahead
			h.Set(PrefixLong+"-Limit", "166000")
			h.Set(PrefixLong+"-Calls-Left", "0")
			h.Set(PrefixLong+"-Calls-Reset", strconv.FormatInt(now.Add(9*time.Hour).Unix(), 10))
			if retryAfter != "" {
				h.Set("Retry-After", retryAfter)
			}
			var told []Wait
			p := NewPacer(PacerConfig{Now: func() time.Time { return now }, OnWait: func(w Wait) { told = append(told, w) }})
			p.Observe(http.StatusTooManyRequests, ParseThrottle(h, now))
			if got := p.NotBefore().Sub(now); got < 9*time.Hour || got > 9*time.Hour+time.Minute {
				t.Errorf("the process that got the 429 waits %v; want the 9 h announced", got)
			}
			raw, _ := json.Marshal(told)
			var saved []Wait
			if err := json.Unmarshal(raw, &saved); err != nil {
				t.Fatal(err)
			}
			later := now.Add(time.Hour)
			p2 := NewPacer(PacerConfig{Now: func() time.Time { return later }})
			w, ok := p2.Restore(saved...)
			if !ok || !w.Until.Equal(p.NotBefore()) {
				t.Errorf("a process restarted an hour later waits until %v (%v); the one that got the 429 until %v", w.Until, ok, p.NotBefore())
			}
		})
	}
}
