package fleet

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/orderwatch/orderwatch/pipeline"
)

// Shop states in the report and in orderwatch_fleet_shops{state}.
const (
	StateActive    = "active"    // this member runs it: its lease held, its loops running
	StateStarting  = "starting"  // this member contends for it or takes it over
	StateStopping  = "stopping"  // this member gives it up (flush, last checkpoint, release)
	StateElsewhere = "elsewhere" // another member holds its lease
	StateFree      = "free"      // nobody holds its lease
)

// startGrace is how long a pipeline may be starting (contending, taking
// over) before it makes the member unready.
const startGrace = 30 * time.Second

// ShopReport is one shop in the fleet's state report.
type ShopReport struct {
	ID     string `json:"id"`
	State  string `json:"state"`
	Holder string `json:"holder,omitempty"` // the member holding its lease
	Ready  *bool  `json:"ready,omitempty"`  // this member's pipeline of it
	Reason string `json:"reason,omitempty"`
}

// Report is the member's state report (GET /state).
type Report struct {
	Instance string         `json:"instance"`
	Bound    bool           `json:"bound"` // the buckets are bound
	Members  map[string]int `json:"members"`
	Share    int            `json:"fairShare"`
	Counts   map[string]int `json:"counts"`
	Shops    []ShopReport   `json:"shops"`
	Invalid  []string       `json:"invalidEntries,omitempty"`
	FileErr  string         `json:"registryError,omitempty"`
	// Differs are the members whose registry (the shops each can run)
	// differs from this member's, with how: a shop one of them cannot
	// run stays with a member that can (Decide), but the difference is a
	// configuration error to fix (a Secret not mounted, a variable not
	// set, a registry not yet updated).
	Differs []string `json:"registryDiffers,omitempty"`
	// Clash: another process announces under this member's name.
	Clash string `json:"memberNameClash,omitempty"`
	// Waiting are this member's shops that are not ready only because the
	// service makes them wait (a spent quota, its throttling): each
	// shop's own readiness, not the member's (a drain is not blocked).
	Waiting []string `json:"waitingForTheService,omitempty"`
	Ready   bool     `json:"ready"`
	Why     string   `json:"why"`
}

// Report reads the member's state now.
func (f *Fleet) Report() Report {
	now := time.Now()
	f.mu.Lock()
	v := f.viewLocked(now)
	rep := Report{Instance: f.cfg.Instance, Bound: f.bound, Members: v.Members, Share: Share(len(v.Shops), len(v.Members)), Counts: map[string]int{}}
	for _, e := range f.invalid {
		rep.Invalid = append(rep.Invalid, e.Error())
	}
	if f.fileErr != nil {
		rep.FileErr = f.fileErr.Error()
	}
	rep.Differs = f.registryDiffersLocked(now)
	if c := f.clashLocked(now); c != nil {
		rep.Clash = c.text
	}
	type pending struct {
		i       int
		w       *pipeline.Watcher // nil while it is built
		started time.Time
	}
	var asks []pending
	for _, id := range v.Shops {
		sr := ShopReport{ID: id, Holder: v.Holder[id]}
		r := f.runs[id]
		switch {
		case r != nil && r.reason != "":
			sr.State, sr.Reason = StateStopping, r.reason
		case r != nil:
			sr.State = StateStarting
			asks = append(asks, pending{len(rep.Shops), r.w, r.started})
		case sr.Holder != "":
			sr.State = StateElsewhere
		default:
			sr.State = StateFree
		}
		rep.Shops = append(rep.Shops, sr)
	}
	f.mu.Unlock()
	// The pipelines are asked outside the fleet's lock.
	var unready []string
	for _, a := range asks {
		sr := &rep.Shops[a.i]
		ok, why, waiting := false, "its pipeline is being built", false
		if a.w != nil {
			ok, why = a.w.Ready()
			waiting = a.w.WaitingForService()
			if a.w.Working() {
				sr.State = StateActive
			}
		}
		sr.Ready, sr.Reason = &ok, why
		switch {
		case ok:
		case waiting:
			rep.Waiting = append(rep.Waiting, sr.ID+": "+why)
		case sr.State == StateActive || now.Sub(a.started) > startGrace:
			unready = append(unready, sr.ID+": "+why)
		}
	}
	for _, s := range rep.Shops {
		rep.Counts[s.State]++
	}
	f.judge(&rep, len(asks), unready)
	return rep
}

// judge sets the member's readiness in rep from the shops it runs
// (starting: its pipelines; unready: those not ready by their own fault).
func (f *Fleet) judge(rep *Report, starting int, unready []string) {
	switch {
	case !rep.Bound:
		rep.Why = "the fleet's buckets cannot be used yet"
	case f.refused() != nil:
		rep.Why = rep.Clash
	case rep.FileErr != "" && len(rep.Shops) == 0:
		rep.Why = rep.FileErr
	case rep.Counts[StateFree] > 0 && starting < rep.Share:
		rep.Why = fmt.Sprintf("%d shops free and this member below its fair share (%d of %d): taking them", rep.Counts[StateFree], starting, rep.Share)
	case len(unready) > 0:
		slices.Sort(unready)
		rep.Why = fmt.Sprintf("%d of this member's shops not ready: %s", len(unready), strings.Join(unready, "; "))
	default:
		rep.Ready = true
		rep.Why = fmt.Sprintf("ok: %d shops active here, %d starting, fair share %d of %d shops over %d members",
			rep.Counts[StateActive], rep.Counts[StateStarting], rep.Share, len(rep.Shops), len(rep.Members))
		if len(rep.Waiting) > 0 {
			rep.Why += fmt.Sprintf("; %d waiting for the service (their own readiness: /shops/<id>/readyz)", len(rep.Waiting))
		}
	}
}

// registryDiffersLocked says, for each live member whose registry differs
// from this one's, how: "m1 cannot run 2 shops of this member's registry:
// paris, rome; m1 runs 1 shop this member does not know: oslo" (the first
// five of each).
func (f *Fleet) registryDiffersLocked(now time.Time) []string {
	var out []string
	for _, m := range f.liveMembersLocked(now) {
		if m.can == nil {
			continue // an earlier version: it does not say
		}
		var lacks, extra []string
		for id := range f.registry {
			if !m.can[id] {
				lacks = append(lacks, id)
			}
		}
		for _, id := range m.Can {
			if _, ok := f.registry[id]; !ok {
				extra = append(extra, id)
			}
		}
		var parts []string
		if len(lacks) > 0 {
			parts = append(parts, fmt.Sprintf("%s cannot run %d shops of this member's registry: %s", m.Instance, len(lacks), firstFew(lacks)))
		}
		if len(extra) > 0 {
			parts = append(parts, fmt.Sprintf("%s runs %d shops this member does not know: %s", m.Instance, len(extra), firstFew(extra)))
		}
		if len(parts) > 0 {
			out = append(out, strings.Join(parts, "; "))
		}
	}
	slices.Sort(out)
	return out
}

// firstFew lists the first five ids (sorted) and how many more.
func firstFew(ids []string) string {
	slices.Sort(ids)
	if len(ids) <= 5 {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:5], ", ") + fmt.Sprintf(" and %d more", len(ids)-5)
}

// Handler serves /healthz, /readyz (ready when every shop this member
// runs is, a shop starting for less than 30 s not counted yet, and no
// shop is free while this member is below its fair share),
// /metrics, /state (the Report, per shop) and /shops/{id}/... (the
// pipeline's own endpoints of a shop this member runs: /state,
// /state/orders/{id}, /readyz).
func (f *Fleet) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { fmt.Fprintln(rw, "ok") })
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		rep := f.Report()
		if !rep.Ready {
			http.Error(rw, rep.Why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, rep.Why)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(f.cfg.Gatherer, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /state", func(rw http.ResponseWriter, _ *http.Request) {
		b, _ := json.MarshalIndent(f.Report(), "", "  ")
		rw.Header().Set("Content-Type", "application/json")
		rw.Write(append(b, '\n'))
	})
	mux.HandleFunc("/shops/{id}/", func(rw http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		f.mu.Lock()
		var w *pipeline.Watcher
		run := f.runs[id]
		if run != nil {
			w = run.w
		}
		f.mu.Unlock()
		switch {
		case run == nil:
			http.Error(rw, fmt.Sprintf("shop %s does not run on this member (see /state)", id), http.StatusNotFound)
		case w == nil:
			http.Error(rw, fmt.Sprintf("shop %s is starting on this member: its pipeline is being built", id), http.StatusServiceUnavailable)
		default:
			http.StripPrefix("/shops/"+id, w.Handler()).ServeHTTP(rw, r)
		}
	})
	return mux
}

// metrics are the fleet's totals; each pipeline's own carry its shop
// label (bounded by the registry: a member registers only the shops it
// runs).
type metrics struct {
	starts      prometheus.Counter
	startErrors prometheus.Counter
	clashes     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, f *Fleet) *metrics {
	m := &metrics{
		starts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderwatch_fleet_pipeline_starts_total", Help: "Shop pipelines this member started (to contend for a shop's lease).",
		}),
		startErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderwatch_fleet_pipeline_start_errors_total", Help: "Shop pipelines that could not be built (a configuration or state file error; see the log).",
		}),
		clashes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "orderwatch_fleet_member_name_clashes_total", Help: "Announcements of another process under this member's name seen (two members with one WATCHER_INSTANCE_ID; see the log).",
		}),
	}
	reg.MustRegister(m.starts, m.startErrors, m.clashes, &fleetCollector{f: f})
	return m
}

var (
	shopsDesc   = prometheus.NewDesc("orderwatch_fleet_shops", "Shops of the registry by state as this member sees them: active (run here), starting, stopping, elsewhere (another member), free; invalid (entries left out).", []string{"state"}, nil)
	membersDesc = prometheus.NewDesc("orderwatch_fleet_members", "Live members of the fleet this member sees (itself included).", nil, nil)
	shareDesc   = prometheus.NewDesc("orderwatch_fleet_fair_share", "Shops per member at most once the fleet is stable: ceil(shops/members).", nil, nil)
	fileErrDesc = prometheus.NewDesc("orderwatch_fleet_registry_error", "1 while the registry file cannot be read or parsed as a whole (the shops in force stay as they were; see /state registryError), else 0.", nil, nil)
	differsDesc = prometheus.NewDesc("orderwatch_fleet_registry_differs", "Live members whose registry (the shops each can run) differs from this member's (see /state registryDiffers).", nil, nil)
)

// fleetCollector reads the report at each scrape.
type fleetCollector struct{ f *Fleet }

func (c *fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- shopsDesc
	ch <- membersDesc
	ch <- shareDesc
	ch <- fileErrDesc
	ch <- differsDesc
}

func (c *fleetCollector) Collect(ch chan<- prometheus.Metric) {
	rep := c.f.Report()
	for _, st := range []string{StateActive, StateStarting, StateStopping, StateElsewhere, StateFree} {
		ch <- prometheus.MustNewConstMetric(shopsDesc, prometheus.GaugeValue, float64(rep.Counts[st]), st)
	}
	ch <- prometheus.MustNewConstMetric(shopsDesc, prometheus.GaugeValue, float64(len(rep.Invalid)), "invalid")
	ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(len(rep.Members)))
	ch <- prometheus.MustNewConstMetric(shareDesc, prometheus.GaugeValue, float64(rep.Share))
	fileErr := 0.0
	if rep.FileErr != "" {
		fileErr = 1
	}
	ch <- prometheus.MustNewConstMetric(fileErrDesc, prometheus.GaugeValue, fileErr)
	ch <- prometheus.MustNewConstMetric(differsDesc, prometheus.GaugeValue, float64(len(rep.Differs)))
}
