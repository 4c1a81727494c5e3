package faults

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/replica"
)

// The group's limits reach the running pipeline: two replicas (pipelines
// in this process, each with its own state file) on an in-process NATS
// server and the simulator over loopback; another replica of the group
// (one past its lease's deadline whose call was answered late) writes to
// the group's limits key as its replica writes it, and the active's
// running client is bound by it through the pipeline's hooks
// (replica.LimitsApplier), not from its next takeover on.

// groupCall is one request to the simulator.
type groupCall struct {
	at   time.Time
	path string
}

// inprocGroup is the simulator, NATS and two replicas of one shop.
type inprocGroup struct {
	t     *testing.T
	sim   *plentysim.Server
	nats  string
	shop  string
	mu    sync.Mutex
	calls []groupCall
	ws    []*pipeline.Watcher
	logs  *e2e.LockedBuffer
}

func newInprocGroup(t *testing.T) *inprocGroup {
	g := &inprocGroup{t: t, nats: testnats.Start(t).ClientURL(), logs: &e2e.LockedBuffer{}}
	g.sim = plentysim.New(plentysim.Config{Seed: 33, MaxSessions: 3})
	g.sim.Generate(20, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Minute))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.calls = append(g.calls, groupCall{time.Now(), r.URL.Path})
		g.mu.Unlock()
		g.sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g.shop = srv.URL
	for _, name := range []string{"a", "b"} {
		g.start(name)
	}
	return g
}

func (g *inprocGroup) start(name string) {
	t := g.t
	cfg := &pipeline.Config{
		PlentyURL: g.shop, PlentyUsername: "demo", PlentyPassword: "demo", PlentyAPIVendor: "service", PlentyTimeout: 10 * time.Second,
		NATSURL: g.nats, Stream: "ORDERS", StreamCreate: true, DuplicateWindow: 10 * time.Minute, StreamReplicas: 1,
		SubjectPrefix: "orders", PublishInFlight: 256, StatePath: filepath.Join(t.TempDir(), name+".db"), OutboxMax: 100000,
		PollInterval: 200 * time.Millisecond, Settle: time.Second, Overlap: 5 * time.Second, StartFrom: pipeline.StartFrom{Back: 24 * time.Hour},
		CallShare: 0.25, ItemsPerPage: 250, SlicePages: 4, Keyset: "auto", BadEntries: "quarantine",
		Lease: true, InstanceID: name, LeaseTTL: 2 * time.Second, LeaseBucket: "orderwatch",
		HTTPAddr: "127.0.0.1:0", LogFormat: "text", LogLevel: "info", ShutdownTimeout: 5 * time.Second,
	}
	w, err := pipeline.New(cfg, pipeline.Options{
		Logger:  slog.New(slog.NewTextHandler(g.logs, nil)).With("replica", name),
		Replica: replica.Tuning{Tick: 50 * time.Millisecond, Retry: 100 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	g.ws = append(g.ws, w)
}

// calling waits for an active replica that calls the shop.
func (g *inprocGroup) calling() {
	testnats.WaitFor(g.t, "an active replica calling the shop", 60*time.Second, func() bool {
		g.mu.Lock()
		n := len(g.calls)
		g.mu.Unlock()
		return n > 5 && (g.ws[0].Working() || g.ws[1].Working())
	})
}

// callsIn are the calls to path ("": any) in [from, to).
func (g *inprocGroup) callsIn(path string, from, to time.Time) []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []time.Time
	for _, c := range g.calls {
		if (path == "" || c.path == path) && !c.at.Before(from) && c.at.Before(to) {
			out = append(out, c.at)
		}
	}
	return out
}

// putLimits writes the group's limits as replica x's replica writes them
// (x knows nothing the group does not: its records are the group's).
func (g *inprocGroup) putLimits(recs map[string]any) {
	t := g.t
	nc, err := nats.Connect(g.nats)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(context.Background(), "orderwatch_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	key := lease.Key(g.shop, "ORDERS") + ".limits"
	var cur struct {
		Records map[string]json.RawMessage `json:"records"`
	}
	if e, err := kv.Get(context.Background(), key); err == nil {
		_ = json.Unmarshal(e.Value(), &cur)
	}
	if cur.Records == nil {
		cur.Records = map[string]json.RawMessage{}
	}
	for name, r := range recs {
		cur.Records[name], _ = json.Marshal(r)
	}
	v, _ := json.Marshal(map[string]any{"writer": lease.Writer{Instance: "x", Nonce: "x"}, "written": time.Now().UTC(), "records": cur.Records})
	if _, err := kv.Put(context.Background(), key, v); err != nil {
		t.Fatal(err)
	}
}

// TestGroupWaitReachesTheRunningClient: x writes a 429's wait of 5 s to
// the group's limits while a replica is active and calling: from a
// second after the write until the wait ends no call reaches the shop.
func TestGroupWaitReachesTheRunningClient(t *testing.T) {
	g := newInprocGroup(t)
	g.calling()
	now := time.Now()
	until := now.Add(5 * time.Second)
	g.putLimits(map[string]any{plenty.WaitsRecord: map[string]any{"waits": []plenty.Wait{
		{Until: until, Reason: plenty.WaitThrottled, Why: "429 answered to x late", Measured: now, Announced: 5 * time.Second},
	}}})
	written := time.Now()
	time.Sleep(time.Until(until.Add(500 * time.Millisecond)))
	if in := g.callsIn("", written.Add(time.Second), until); len(in) > 0 {
		t.Errorf("%d calls to the shop inside the wait x wrote to the group at %s (until %s), the first at %s",
			len(in), written.Format("15:04:05.000"), until.Format("15:04:05.000"), in[0].Format("15:04:05.000"))
	}
	if len(g.callsIn("", until, time.Now().Add(time.Hour))) == 0 && t.Failed() {
		t.Log(g.logs.String())
	}
}

// TestGroupSessionsBindTheRunningClient: the shop allows 3 sessions (the
// client keeps one for the shop's other integrations: 2 of its own); x
// writes to the group's sessions that 2 of its logins may have opened
// sessions, live for 5 s. The shop then ends the active's session: the
// active must not log in again before x's first session ends (a login
// would make 3 of the group's, none left for the other integrations).
func TestGroupSessionsBindTheRunningClient(t *testing.T) {
	g := newInprocGroup(t)
	g.calling()
	now := time.Now()
	ends := []time.Time{now.Add(5 * time.Second), now.Add(5*time.Second + time.Millisecond)}
	g.putLimits(map[string]any{plenty.SessionsRecord: map[string]any{"owner": "x-client", "unsure_ends": ends, "limit": 3, "saved_at": now}})
	time.Sleep(time.Second)
	expired := time.Now()
	g.sim.ExpireSessions()
	time.Sleep(time.Until(ends[0].Add(time.Second)))
	if in := g.callsIn("/rest/login", expired, ends[0]); len(in) > 0 {
		t.Errorf("the active logged in at %s, while 2 sessions of x may be open until %s (the shop allows 3)", in[0].Format("15:04:05.000"), ends[0].Format("15:04:05.000"))
	}
	testnats.WaitFor(t, "a login after x's first session ended", 20*time.Second, func() bool {
		return len(g.callsIn("/rest/login", ends[0], time.Now())) > 0
	})
}
