package pipeline

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves /healthz, /readyz, /metrics, /state, /state/orders (a
// paged listing, see ParseListQuery) and /state/orders/{id}.
func (w *Watcher) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, r *http.Request) {
		// A standby runs no sweep or publish loop; its mirror retries on
		// its own (readiness says when it is behind).
		if (w.rep == nil || w.rep.Working()) && (!w.sweepAlive.Load() || !w.pubAlive.Load()) {
			http.Error(rw, "a loop has stopped", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, "ok")
	})
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, r *http.Request) {
		ok, why := Ready(w.status())
		if !ok {
			http.Error(rw, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(rw, why)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(w.opt.Gatherer, promhttp.HandlerOpts{Registry: w.opt.Registerer}))
	mux.HandleFunc("GET /state", w.serveStateReport)
	mux.HandleFunc("GET /state/orders", w.serveOrderList)
	mux.HandleFunc("GET /state/orders/{id}", w.serveOrderState)
	return mux
}

// serveStateReport is GET /state.
func (w *Watcher) serveStateReport(rw http.ResponseWriter, _ *http.Request) {
	rep, err := NewReport(w.store, w.cfg.StartFrom)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	if pct := w.firstSyncPct.Load(); pct >= 0 && !rep.FirstSync.Done {
		// The running sweep's position, finer than the file's watermark
		// (the same figure as orderwatch_first_sync_progress_ratio).
		rep.FirstSync.Progress = float64(pct) / 100
	}
	wk := w.work.Load()
	rep.Paused = newPausedReport(wk.client.Pacer().Pending()) // the running process's view
	if w.rep != nil {
		rep.Lease = w.rep.Report()
	}
	rep.Timings = newTimingsReport(wk.timings.InForce())
	writeJSON(rw, rep)
}

// serveOrderState is GET /state/orders/{id}.
func (w *Watcher) serveOrderState(rw http.ResponseWriter, r *http.Request) {
	id, err := ParseOrderID(r.PathValue("id"))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	rep, ok, err := LookupOrder(w.store, id)
	switch {
	case err != nil:
		http.Error(rw, err.Error(), http.StatusInternalServerError)
	case !ok:
		http.Error(rw, fmt.Sprintf("order %d is not tracked", id), http.StatusNotFound)
	default:
		writeJSON(rw, rep)
	}
}

// serveOrderList is GET /state/orders?status=&olderThan=&after=&limit=.
func (w *Watcher) serveOrderList(rw http.ResponseWriter, r *http.Request) {
	q, err := ParseListQuery(r.URL.Query(), time.Now())
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	list, err := ListOrders(w.store, q)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(rw, list)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(b, '\n'))
}
