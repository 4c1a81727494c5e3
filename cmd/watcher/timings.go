package main

import (
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/poller"
)

// durationOrDerived renders a timing setting for the start-up line.
func durationOrDerived(d time.Duration) string {
	if d <= 0 {
		return "derived"
	}
	return d.String()
}

// timingSources are every source a timing can have (the info metric's
// label values).
var timingSources = []string{poller.SourceExplicit, poller.SourceBudget, poller.SourceLate, poller.SourceDefault}

// registerTimings adds the interval, settle and overlap in force, why
// (orderwatch_timing_source_info), and the late arrivals found beyond the
// overlap, read from the poller's Timings when scraped.
func registerTimings(reg prometheus.Registerer, in func() poller.InForce) {
	if in == nil {
		return
	}
	gauge := func(name, help string, v func(poller.InForce) time.Duration) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(in()).Seconds() })
	}
	reg.MustRegister(
		gauge("orderwatch_poll_interval_seconds", "The poll interval in force: WATCHER_POLL_INTERVAL, or derived from the call budget and the measured cost of a sweep (0 before the first sweep); orderwatch_sweep_gap_seconds is the gap with the budget's stretching.",
			func(i poller.InForce) time.Duration { return i.Interval }),
		gauge("orderwatch_settle_seconds", "The settle in force: WATCHER_SETTLE, or derived from the measured late arrivals.",
			func(i poller.InForce) time.Duration { return i.Settle }),
		gauge("orderwatch_overlap_seconds", "The overlap in force: WATCHER_OVERLAP, or derived from the measured late arrivals (a probe sweep every 5 minutes reads 10 minutes back).",
			func(i poller.InForce) time.Duration { return i.Overlap }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "orderwatch_late_arrivals_beyond_overlap_total",
			Help: "Changes that arrived later than the overlap in force, found by a probe sweep (published; each widened the overlap); kept in the state file.",
		}, func() float64 { return float64(in().BeyondOverlap) }),
	)
	for _, timing := range []string{"interval", "settle", "overlap"} {
		for _, source := range timingSources {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "orderwatch_timing_source_info",
				Help:        "1 for the source of each timing in force: explicit (a WATCHER_ setting), budget (the call budget), late_arrivals (measured), default (nothing measured yet).",
				ConstLabels: prometheus.Labels{"timing": timing, "source": source},
			}, func() float64 {
				i := in()
				return b2f(map[string]string{"interval": i.IntervalSource, "settle": i.SettleSource, "overlap": i.OverlapSource}[timing] == source)
			}))
		}
	}
}

// timingsReport is the state report's part on the timings in force.
type timingsReport struct {
	IntervalSeconds float64 `json:"intervalSeconds,omitempty"`
	SettleSeconds   float64 `json:"settleSeconds"`
	OverlapSeconds  float64 `json:"overlapSeconds"`
	poller.InForce
}

func newTimingsReport(in poller.InForce) *timingsReport {
	return &timingsReport{IntervalSeconds: in.Interval.Seconds(), SettleSeconds: in.Settle.Seconds(), OverlapSeconds: in.Overlap.Seconds(), InForce: in}
}

// printTimings adds the timings to the printed state report.
func printTimings(w io.Writer, t *timingsReport) {
	if t == nil {
		return
	}
	interval := "not known yet"
	if t.IntervalSource != "" {
		interval = fmt.Sprintf("%gs (%s)", t.IntervalSeconds, t.IntervalSource)
	}
	fmt.Fprintf(w, "interval       %s\n", interval)
	fmt.Fprintf(w, "settle         %gs (%s)\n", t.SettleSeconds, t.SettleSource)
	fmt.Fprintf(w, "overlap        %gs (%s; %d late arrivals in the last day, %d beyond the overlap)\n", t.OverlapSeconds, t.OverlapSource, t.LateArrivals, t.BeyondOverlap)
}
