package poller

import (
	"fmt"
	"strings"
	"time"
)

// Ledger is the read ledger's record (tests read and damage it).
type Ledger = ledger

// LedgerString renders the read ledger (tests' logs).
func (p *Poller) LedgerString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "floor %s", p.reads.Floor.Format(time.TimeOnly))
	for _, s := range p.reads.Spans {
		fmt.Fprintf(&b, " [%s,%s)@%v", s.From.Format(time.TimeOnly), s.To.Format(time.TimeOnly), s.Age)
	}
	return b.String()
}

// ClaimedAge is the age at which the read ledger saved in the state file
// says the stamp x was read completely (ok false: not read, or no
// ledger); below its floor, the floor's age (a day in a record of an
// earlier version).
func ClaimedAge(r RecordStore, x time.Time) (age time.Duration, ok bool) {
	var l ledger
	if found, err := r.LoadRecord(LedgerRecord, &l); err != nil || !found {
		return 0, false
	}
	x = sec(x)
	if x.Before(l.Floor) {
		if l.FloorAge > 0 {
			return l.FloorAge, true
		}
		return 24 * time.Hour, true
	}
	for _, s := range l.Spans {
		if !x.Before(s.From) && x.Before(s.To) {
			return s.Age, true
		}
	}
	return 0, false
}

// LedgerFloor is the read ledger's floor (tests).
func (p *Poller) LedgerFloor() time.Time { return p.reads.Floor }
