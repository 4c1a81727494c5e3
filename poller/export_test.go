package poller

import (
	"fmt"
	"strings"
	"time"
)

// LedgerString renders the read ledger (tests' logs).
func (p *Poller) LedgerString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "floor %s", p.reads.Floor.Format(time.TimeOnly))
	for _, s := range p.reads.Spans {
		fmt.Fprintf(&b, " [%s,%s)@%v", s.From.Format(time.TimeOnly), s.To.Format(time.TimeOnly), s.Age)
	}
	return b.String()
}
