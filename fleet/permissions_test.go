package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/shops"
)

// violations is a NATS server's log, keeping the permission violations.
type violations struct {
	mu    sync.Mutex
	lines []string
}

func (v *violations) log(format string, args ...any) {
	if line := fmt.Sprintf(format, args...); strings.Contains(line, "Violation") {
		v.mu.Lock()
		v.lines = append(v.lines, line)
		v.mu.Unlock()
	}
}
func (v *violations) Noticef(f string, a ...any) { v.log(f, a...) }
func (v *violations) Warnf(f string, a ...any)   { v.log(f, a...) }
func (v *violations) Fatalf(f string, a ...any)  { v.log(f, a...) }
func (v *violations) Errorf(f string, a ...any)  { v.log(f, a...) }
func (v *violations) Debugf(f string, a ...any)  { v.log(f, a...) }
func (v *violations) Tracef(f string, a ...any)  { v.log(f, a...) }

func (v *violations) take() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := v.lines
	v.lines = nil
	return out
}

// TestFleetLeastPrivilege: a NATS server enforcing NATSPermissions of a
// fleet of two shops (plentysim's tenants) for the user of its members.
// A member (Serve, as watcher run) creates the stream and the buckets,
// runs both shops (leases, first syncs, checkpoints, snapshot dumps) and
// publishes their changes; it answers a rescan request; when it stops,
// a second member takes both shops over with their state (checkpoint,
// dump, stream) and publishes the next changes: exactly one event per
// change, and nothing refused on the way (neither in the members' logs
// nor in the server's). The same user cannot touch another fleet's
// buckets, stream, subjects or rescans, nor delete its own stream.
func TestFleetLeastPrivilege(t *testing.T) {
	t.Parallel()
	var perms pipeline.Permissions
	w := newWorldWith(t, 2, func(registry string) []*server.User {
		cfg := base("nats://127.0.0.1:4222") // the server's address is not known yet: unused
		cfg.ShopsFile = registry
		r, err := ReadRegistry(&cfg, func(string) string { return "demo" })
		if err != nil || len(r.Shops) != 2 {
			t.Fatalf("registry: %v %v", r, err)
		}
		perms = NATSPermissions(&cfg, r.Shops)
		return []*server.User{{Username: "member", Password: "pw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: perms.Publish}, Subscribe: &server.SubjectPermission{Allow: perms.Subscribe},
			Response: &server.ResponsePermission{MaxMsgs: 1, Expires: time.Minute},
		}}}
	})
	var refusedByServer violations
	w.ns.SetLogger(&refusedByServer, false, false)
	memberURL := w.ns.ClientURL()
	type run struct {
		url  string
		stop func() error
		logs *e2e.LockedBuffer
	}
	start := func(name string) run {
		cfg := base(memberURL)
		cfg.NATSUser, cfg.NATSPassword = "member", "pw"
		cfg.ShopsFile, cfg.StateDir, cfg.InstanceID = w.registry, filepath.Join(t.TempDir(), name), name
		r := run{logs: &e2e.LockedBuffer{}}
		r.url, r.stop = serve(t, &cfg, ServeOptions{Logger: slog.New(slog.NewTextHandler(r.logs, nil))})
		return r
	}
	allActive := func(r run) func() bool {
		return func() bool {
			_, body := get(t, r.url+"/state")
			return strings.Count(body, `"state": "active"`) == 2 && strings.Count(body, `"reason": "ok"`) == 2
		}
	}
	ctx := context.Background()
	m1 := start("m1")
	testnats.WaitForEvery(t, "m1 runs both shops", 60*time.Second, 100*time.Millisecond, allActive(m1))
	changes := w.mutate(0)
	w.waitEvents(changes, 30*time.Second)
	checkpoints, err := w.js.KeyValue(ctx, "orderwatch_checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	dumps, err := w.js.ObjectStore(ctx, "orderwatch_snapshot")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range w.sim.IDs() {
		key := lease.Key(id, "ORDERS")
		testnats.WaitFor(t, id+"'s checkpoint and snapshot dump", 60*time.Second, func() bool {
			_, errC := checkpoints.Get(ctx, key)
			_, errD := dumps.GetInfo(ctx, key)
			return errC == nil && errD == nil
		})
	}
	// watcher rescan -shop with the members' user: the member answers.
	ops, err := nats.Connect(memberURL, nats.UserInfo("member", "pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	shop := w.sim.IDs()[1]
	if rep, err := replica.RequestRescan(rctx, ops, lease.Key(shop, "ORDERS"), replica.RescanRequest{From: time.Now().Add(-time.Hour)}); err != nil || !rep.Accepted || rep.Instance != "m1" {
		t.Errorf("rescan of %s: %+v, %v; want m1's acceptance", shop, rep, err)
	}

	// m1 leaves; m2, with no state file, takes both shops over.
	if err := m1.stop(); err != nil {
		t.Fatal(err)
	}
	m2 := start("m2")
	testnats.WaitForEvery(t, "m2 runs both shops", 60*time.Second, 100*time.Millisecond, allActive(m2))
	changes = append(changes, w.mutate(1)...)
	w.waitEvents(changes, 30*time.Second)
	if !strings.Contains(m2.logs.String(), "continues from the group's checkpoint") {
		t.Error("m2 did not take the shops over with their state")
	}
	for name, r := range map[string]run{"m1": m1, "m2": m2} {
		if l := r.logs.String(); strings.Contains(strings.ToLower(l), "permission") {
			t.Errorf("%s was refused something:\n%s", name, l)
		}
	}
	if v := refusedByServer.take(); len(v) > 0 {
		t.Errorf("the server refused the members:\n%s", strings.Join(v, "\n"))
	}

	// Another fleet's state, as its members leave it.
	if _, err := w.js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"other.>"}}); err != nil {
		t.Fatal(err)
	}
	okv, err := w.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "other_checkpoint"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := okv.Put(ctx, "x.OTHER", []byte(`{"state":{}}`)); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"other_lease", "other_fleet"} {
		if _, err := w.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: b}); err != nil {
			t.Fatal(err)
		}
	}
	refused := make(chan error, 20)
	nc, err := nats.Connect(memberURL, nats.UserInfo("member", "pw"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { refused <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Second))
	for _, b := range []string{"other_lease", "other_checkpoint", "other_fleet"} {
		if _, err := js.KeyValue(ctx, b); err == nil {
			t.Errorf("the fleet's user binds the other fleet's bucket %s", b)
		}
	}
	if _, err := js.Stream(ctx, "OTHER"); err == nil {
		t.Error("the fleet's user reads the other fleet's stream")
	}
	if err := js.DeleteStream(ctx, "ORDERS"); err == nil {
		t.Error("the fleet's user deletes its stream")
	}
	if _, err := js.Publish(ctx, "other.x.order.created", []byte("{}")); err == nil {
		t.Error("the fleet's user publishes on the other fleet's subjects")
	}
	if _, err := nc.SubscribeSync(replica.RescanSubject("x.OTHER")); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	if !testnats.AwaitRefusal(refused, `Subscription to "orderwatch.rescan.x.OTHER"`, 5*time.Second) {
		t.Error("the fleet's user answers the other fleet's rescan requests")
	}
	if len(refusedByServer.take()) == 0 {
		t.Error("the server logged no violation") // the check above would see none
	}
	if code, _ := get(t, m2.url+"/readyz"); code != http.StatusOK {
		t.Errorf("m2 /readyz: %d", code)
	}
}

// TestFleetPermissions: the fleet's wildcards cover every shop on its
// stream and prefix; a shop with a stream or prefix of its own adds them.
func TestFleetPermissions(t *testing.T) {
	b := base("")
	p := NATSPermissions(&b, []shops.Shop{{ID: "berlin"}, {ID: "paris", SubjectPrefix: "orders.paris"}})
	for _, want := range []string{"orders.>", "$JS.API.STREAM.CREATE.ORDERS", "orderwatch.rescan.*.ORDERS", "$KV.orderwatch_fleet.>", "$JS.API.*.*.KV_orderwatch_fleet.>"} {
		if !slices.Contains(p.Publish, want) {
			t.Errorf("publish has no %s: %q", want, p.Publish)
		}
	}
	if !slices.Equal(p.Subscribe, []string{"_INBOX.>", "orderwatch.rescan.*.ORDERS"}) {
		t.Errorf("subscribe %q", p.Subscribe)
	}
	q := NATSPermissions(&b, []shops.Shop{{ID: "berlin"}, {ID: "london", Stream: "ORDERS_UK", SubjectPrefix: "uk.london"}})
	extra := slices.DeleteFunc(slices.Clone(q.Publish), func(s string) bool { return slices.Contains(p.Publish, s) })
	if want := []string{"uk.london.>", "$JS.API.STREAM.INFO.ORDERS_UK", "$JS.API.STREAM.CREATE.ORDERS_UK", "$JS.API.STREAM.UPDATE.ORDERS_UK",
		"$JS.API.STREAM.MSG.GET.ORDERS_UK", "$JS.API.DIRECT.GET.ORDERS_UK.>", "$JS.API.CONSUMER.CREATE.ORDERS_UK.>",
		"$JS.API.CONSUMER.MSG.NEXT.ORDERS_UK.>", "$JS.API.CONSUMER.DELETE.ORDERS_UK.>", "orderwatch.rescan.*.ORDERS_UK"}; !slices.Equal(extra, want) {
		t.Errorf("london adds %q, want %q", extra, want)
	}
	if !slices.Contains(q.Subscribe, "orderwatch.rescan.*.ORDERS_UK") {
		t.Errorf("subscribe %q", q.Subscribe)
	}
}

// TestFleetPermissionsDocumented: the NATS user in docs/fleet.md is
// NATSPermissions of the page's example registry, and nats-server reads
// it so.
func TestFleetPermissionsDocumented(t *testing.T) {
	b := base("")
	b.LeaseBucket = "orderwatch"
	p := NATSPermissions(&b, []shops.Shop{{ID: "berlin", SubjectPrefix: "orders.berlin", Stream: "ORDERS"}, {ID: "paris"}})
	conf := p.Conf("WATCHER_STREAM=ORDERS WATCHER_SUBJECT_PREFIX=orders WATCHER_LEASE_BUCKET=orderwatch, the registry above",
		"orderwatch-fleet", "FLEET_NATS_PASSWORD")
	want := "```\n" + conf + "```\n"
	doc, err := os.ReadFile("../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "<!-- fleet-nats-user:begin -->\n")
	block, _, ok2 := strings.Cut(rest, "<!-- fleet-nats-user:end -->")
	if !ok || !ok2 || block != want {
		t.Errorf("docs/fleet.md: the NATS user between the fleet-nats-user markers is not NATSPermissions; put there:\n%s", want)
	}
	file := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FLEET_NATS_PASSWORD", "secret")
	opts, err := server.ProcessConfigFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if u := opts.Users; len(u) != 1 || u[0].Password != "secret" || u[0].Permissions.Response == nil ||
		!slices.Equal(u[0].Permissions.Publish.Allow, p.Publish) || !slices.Equal(u[0].Permissions.Subscribe.Allow, p.Subscribe) {
		t.Errorf("the server reads the documented user as %+v", u)
	}
}
