package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/orderwatch/orderwatch/fleet"
	"github.com/orderwatch/orderwatch/internal/testnats"
)

// The Grafana dashboard and the alerting rules the chart ships (one copy
// each, under the chart's files/), read from the repository.
const (
	dashboardFile = "../../deploy/helm/orderwatch/files/dashboard.json"
	alertsFile    = "../../deploy/helm/orderwatch/files/alerts.yaml"
)

// TestDashboardAndAlertsUseExportedMetrics: every metric a dashboard query,
// a dashboard variable, an alert expression or an example rule of the docs
// names is one the binary's
// registry exports (wire: the pipeline's and the hot standby's metrics plus
// the Go and process collectors), so neither can rot when a metric is renamed or dropped.
func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	exported := exportedMetricNames(t)
	used := map[string][]string{} // metric -> where
	for where, expr := range dashboardQueries(t) {
		for _, name := range promqlMetricNames(t, expr) {
			used[name] = append(used[name], where)
		}
	}
	for where, expr := range alertExpressions(t) {
		for _, name := range promqlMetricNames(t, expr) {
			used[name] = append(used[name], where)
		}
	}
	for where, expr := range docExampleExpressions(t) {
		for _, name := range promqlMetricNames(t, expr) {
			used[name] = append(used[name], where)
		}
	}
	if len(used) < 10 {
		t.Fatalf("found only %d metric names in the dashboard and the alerts; is the extraction broken?", len(used))
	}
	var missing []string
	for name, where := range used {
		if !exported[name] {
			sort.Strings(where)
			missing = append(missing, fmt.Sprintf("%s (%s)", name, strings.Join(where, "; ")))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d metric(s) used but not exported by the watcher:\n  %s", len(missing), strings.Join(missing, "\n  "))
	}
}

// TestPromQLMetricNames pins the extraction the test above relies on.
func TestPromQLMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`orderwatch_outbox_depth >= 100000`: {"orderwatch_outbox_depth"},
		`sum by (type) (rate(orderwatch_events_total{job=~"$job", type!="x"}[$__rate_interval]))`: {"orderwatch_events_total"},
		`histogram_quantile(0.99, sum by (le, route) (rate(orderwatch_api_call_duration_seconds_bucket[5m])))`: {
			"orderwatch_api_call_duration_seconds_bucket"},
		`(a_metric > 1) and on (job, instance) (changes(b_metric[30m] offset 1h) == 0) unless ignoring(x) c_metric`: {"a_metric", "b_metric", "c_metric"},
		`time() - orderwatch_last_verified_sweep_timestamp_seconds > 9e2`:                                           {"orderwatch_last_verified_sweep_timestamp_seconds"},
		`clamp_min(x_seconds - time(), 0) * 1000 or vector(0)`:                                                      {"x_seconds"},
		`label_values(orderwatch_outbox_depth{job=~"$job"}, instance)`:                                              {"orderwatch_outbox_depth"},
		`label_values(instance)`: nil,
		`sum without (pod) (m1) / ignoring (code) group_left (route) m2`: {"m1", "m2"},
	} {
		got := promqlMetricNames(t, expr)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %q, want %q", expr, got, want)
		}
	}
}

// exportedMetricNames wires a watcher with the hot standby (wire) and
// returns every series name a scrape can show: each collector's descriptors,
// with _bucket, _sum and _count for histograms and _sum, _count for
// summaries (types from a gather, and from the collector for vectors that
// have no child yet).
func exportedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	rec := &recordingRegisterer{Registry: prometheus.NewRegistry()}
	ns := testnats.Start(t)
	cfg := demoConfig("http://127.0.0.1:1", ns.ClientURL(), filepath.Join(t.TempDir(), "state.db"), time.Second)
	cfg.HTTPAddr, cfg.Lease, cfg.LeaseBucket, cfg.LeaseTTL = "127.0.0.1:0", true, "orderwatch", 9*time.Second
	w, err := wire(cfg, newLogger(io.Discard, "text", "error"), rec)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	// A fleet member's own metrics (orderwatch_fleet_*; its pipelines'
	// are the ones above with a shop label): fleet.New registers them and
	// needs no NATS round trip until it runs.
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := fleet.New(fleet.Config{NC: nc, Instance: "m0", StateDir: t.TempDir(), Base: *cfg, Registerer: rec, Gatherer: rec}); err != nil {
		t.Fatal(err)
	}
	kinds := map[string]dto.MetricType{}
	names := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range rec.collectors {
		var kind dto.MetricType = -1
		switch c.(type) {
		case *prometheus.HistogramVec:
			kind = dto.MetricType_HISTOGRAM
		case *prometheus.SummaryVec:
			kind = dto.MetricType_SUMMARY
		}
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read the name of %s", d)
			}
			names[m[1]] = true
			if kind >= 0 {
				kinds[m[1]] = kind
			}
		}
	}
	mfs, err := rec.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		kinds[mf.GetName()] = mf.GetType()
	}
	for name, kind := range kinds {
		switch kind {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name+"_sum"], names[name+"_count"] = true, true
		}
	}
	if !names["orderwatch_outbox_depth"] || !names["orderwatch_sweep_duration_seconds_bucket"] || !names["go_goroutines"] || !names["orderwatch_fleet_members"] {
		t.Fatalf("the registry lacks metrics every build has: %v", names)
	}
	return names
}

// recordingRegisterer is a real registry that also keeps what was registered.
type recordingRegisterer struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// dashboardQueries returns every PromQL expression of the dashboard (panel
// targets, rows' panels included) and every query of its variables.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels     []dashPanel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	q := map[string]string{}
	var walk func([]dashPanel)
	walk = func(ps []dashPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("dashboard panel %q target %s: no expr", p.Title, tg.RefID)
				}
				q[fmt.Sprintf("dashboard panel %q %s", p.Title, tg.RefID)] = tg.Expr
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("dashboard panel %q has no query", p.Title)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var s string
		var obj struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &s) != nil {
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("dashboard variable %s: query %s: %v", v.Name, v.Query, err)
			}
			s = obj.Query
		}
		q["dashboard variable "+v.Name] = s
	}
	if len(q) < 20 {
		t.Fatalf("%s: only %d queries found", dashboardFile, len(q))
	}
	return q
}

type dashPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

// docExampleExpressions returns the one-line expr of every example rule
// in the docs' YAML blocks (the status dwell alerts are examples, not in
// alerts.yaml: which status and how long are the shop's to say).
func docExampleExpressions(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	exprLine := regexp.MustCompile(`^\s*expr: (.+)$`)
	for _, doc := range []string{"../../docs/operations.md", "../../docs/consuming.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		inYAML := false
		for i, l := range strings.Split(string(b), "\n") {
			switch t := strings.TrimSpace(l); {
			case t == "```yaml":
				inYAML = true
			case strings.HasPrefix(t, "```"):
				inYAML = false
			}
			if m := exprLine.FindStringSubmatch(l); inYAML && m != nil {
				exprs[fmt.Sprintf("example rule %s:%d", doc, i+1)] = m[1]
			}
		}
	}
	if len(exprs) == 0 {
		t.Fatal("no example rule found in the docs; is the extraction broken?")
	}
	return exprs
}

// alertExpressions returns the expr of every rule in alerts.yaml. The main
// module has no YAML library (and gets none for a test), so this reads the
// two forms the file uses, `expr: <one line>` and `expr: |` with a more
// indented block, and fails on anything else. The chart module
// (deploy/helm) decodes the same file strictly into the Prometheus
// Operator's types, and promtool checks it.
func alertExpressions(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	exprs := map[string]string{}
	alert := ""
	rules := 0
	alertLine := regexp.MustCompile(`^\s*- (alert|record): (\S+)\s*$`)
	exprLine := regexp.MustCompile(`^(\s*)expr: (.*)$`)
	for i := 0; i < len(lines); i++ {
		if m := alertLine.FindStringSubmatch(lines[i]); m != nil {
			alert = m[2]
			rules++
			continue
		}
		m := exprLine.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if alert == "" {
			t.Fatalf("%s:%d: expr outside a rule", alertsFile, i+1)
		}
		where := "alert " + alert
		if _, dup := exprs[where]; dup {
			t.Fatalf("%s:%d: a second expr for %s", alertsFile, i+1, alert)
		}
		switch v := strings.TrimSpace(m[2]); {
		case v == "|" || v == "|-":
			indent := len(m[1])
			var body []string
			for i+1 < len(lines) {
				next := lines[i+1]
				if strings.TrimSpace(next) != "" && len(next)-len(strings.TrimLeft(next, " ")) <= indent {
					break
				}
				body = append(body, next)
				i++
			}
			exprs[where] = strings.Join(body, "\n")
		case v == "" || strings.HasPrefix(v, ">") || strings.HasPrefix(v, `"`) || strings.HasPrefix(v, "'"):
			t.Fatalf("%s:%d: expr form %q not understood by this test; use a plain line or a | block", alertsFile, i+1, v)
		default:
			exprs[where] = v
		}
	}
	if rules == 0 || len(exprs) != rules {
		t.Fatalf("%s: %d rules but %d expressions read", alertsFile, rules, len(exprs))
	}
	return exprs
}

var (
	promqlString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlBraces   = regexp.MustCompile(`\{[^{}]*\}`)
	promqlBrackets = regexp.MustCompile(`\[[^\[\]]*\]`)
	// by (...), without (...), on (...), ignoring (...), group_left (...), group_right (...)
	promqlGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promqlIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	labelValues    = regexp.MustCompile(`^\s*label_values\(\s*(?:([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(?:\{[^}]*\})?\s*,)?\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)
	promqlKeywords = map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true, "atan2": true,
	}
)

// promqlMetricNames lists the metric names of a PromQL expression (or of a
// Grafana label_values(...) variable query), sorted: what remains once
// strings, label matchers, ranges, grouping clauses, functions, keywords and
// numbers are taken out.
func promqlMetricNames(t *testing.T, expr string) []string {
	t.Helper()
	if strings.HasPrefix(strings.TrimSpace(expr), "label_values(") {
		m := labelValues.FindStringSubmatch(expr)
		if m == nil {
			t.Fatalf("variable query %q not understood", expr)
		}
		if m[1] == "" {
			return nil
		}
		return []string{m[1]}
	}
	s := promqlString.ReplaceAllString(expr, `""`)
	s = promqlBraces.ReplaceAllString(s, " ")
	s = promqlBrackets.ReplaceAllString(s, " ")
	s = promqlGrouping.ReplaceAllString(s, " ")
	seen := map[string]bool{}
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(s, -1) {
		tok := s[loc[0]:loc[1]]
		if strings.HasSuffix(tok, "(") { // a function call
			continue
		}
		if loc[0] > 0 && (isDigit(s[loc[0]-1]) || s[loc[0]-1] == '.' || s[loc[0]-1] == '$') {
			continue // the exponent or unit of a number (9e2, 1h), a $variable
		}
		if promqlKeywords[strings.ToLower(tok)] || seen[tok] {
			continue
		}
		seen[tok] = true
		names = append(names, tok)
	}
	sort.Strings(names)
	return names
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
