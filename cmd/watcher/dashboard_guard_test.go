package main

import (
	"strings"
	"testing"
)

// TestDashboardShowsNoNaN pins what a Prometheus scraping the demo showed
// (docs/reliability.md, "Dashboard and alerts against a real Prometheus"): a histogram quantile over an interval without
// observations, and a ratio over an interval without its denominator, are
// NaN, which Grafana draws as an empty or broken panel. Every such query
// drops the NaN (">= 0", a guard with "and on", a denominator "> 0") or
// shows 0 ("or vector(0)"). The "-1 = not reported" of
// orderwatch_api_calls_left is filtered out and its periods are not mixed
// on one axis, and the publishing panel names NATS.
func TestDashboardShowsNoNaN(t *testing.T) {
	queries := dashboardQueries(t)
	quantiles, ratios, callsLeft, nats := 0, 0, 0, 0
	for where, expr := range queries {
		if !strings.HasPrefix(where, "dashboard panel ") {
			continue
		}
		if strings.Contains(expr, "histogram_quantile(") {
			quantiles++
			if !strings.Contains(expr, ">= 0") && !strings.Contains(expr, " and on (") {
				t.Errorf("%s: %s\n  is NaN without observations: filter it (>= 0, and on (...) rate > 0) or show 0 (or vector(0))", where, expr)
			}
		}
		if i := strings.LastIndex(expr, " / "); i >= 0 {
			ratios++
			if !strings.Contains(expr[i:], "> 0)") {
				t.Errorf("%s: %s\n  is NaN when the denominator is 0: divide by (... > 0)", where, expr)
			}
		}
		if strings.Contains(expr, "orderwatch_api_calls_left") {
			callsLeft++
			if !strings.Contains(expr, `period=`) || !strings.Contains(expr, ">= 0") {
				t.Errorf("%s: %s\n  mixes periods or shows -1 (not reported): select the period and filter >= 0", where, expr)
			}
		}
		if strings.Contains(expr, "orderwatch_events_published_total") {
			nats++
			if !strings.Contains(where, "NATS") {
				t.Errorf("%s: publishing to NATS, but the title does not say NATS", where)
			}
		}
	}
	if quantiles < 4 || ratios < 1 || callsLeft < 2 || nats < 1 {
		t.Errorf("found %d quantiles, %d ratios, %d calls-left and %d published queries; has the dashboard changed shape?", quantiles, ratios, callsLeft, nats)
	}
}
