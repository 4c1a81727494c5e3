package pipeline

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/internal/e2e"
	"github.com/orderwatch/orderwatch/internal/testnats"
	"github.com/orderwatch/orderwatch/plentysim"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/shopid"
)

// TestLeastPrivilege: a NATS server that enforces the permissions of
// NATSPermissions, one user per shop. Two replicas of shop a run with its
// user: the active publishes, the standby mirrors the stream and loads the
// active's snapshot dump, takes over when the active stops and answers a
// rescan request; nothing is refused on the way. The same user cannot
// read shop b's buckets, object store or stream.
func TestLeastPrivilege(t *testing.T) {
	sim := plentysim.New(plentysim.Config{Seed: 5})
	now := time.Now()
	sim.Generate(20, now.Add(-3*time.Hour), now.Add(-2*time.Hour))
	shop := httptest.NewServer(sim)
	defer shop.Close()

	var users []*server.User
	natsURL := "" // set once the server listens
	cfgs := map[string]func(instance string) *Config{}
	for _, s := range []string{"a", "b"} {
		cfgs[s] = func(instance string) *Config {
			c := testConfig(t, shop.URL, natsURL)
			c.ShopID, c.Stream, c.SubjectPrefix, c.LeaseBucket = "shop-"+s, "ORDERS_"+strings.ToUpper(s), "orders_"+s, "ow_"+s
			c.NATSUser, c.NATSPassword, c.InstanceID = "shop-"+s, "pw-"+s, instance
			// The default TTL: the hand-over below is a release, and a
			// short TTL lets a loaded machine's late renewal move the lease
			// before the test stops a1.
			c.Lease, c.LeaseTTL, c.BaselineEvents = true, 9*time.Second, true
			return c
		}
		p := NATSPermissions(cfgs[s](""))
		users = append(users, &server.User{Username: "shop-" + s, Password: "pw-" + s, Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: p.Publish}, Subscribe: &server.SubjectPermission{Allow: p.Subscribe},
			Response: &server.ResponsePermission{MaxMsgs: 1, Expires: time.Minute},
		}})
	}
	users = append(users, &server.User{Username: "admin", Password: "admin"})
	natsURL = testnats.StartWith(t, func(o *server.Options) { o.Users = users }).ClientURL()

	type run struct {
		w    *Watcher
		logs *e2e.LockedBuffer
		stop context.CancelFunc
		done chan struct{}
	}
	start := func(instance string) *run {
		r := &run{logs: &e2e.LockedBuffer{}, done: make(chan struct{})}
		var err error
		r.w, err = New(cfgs["a"](instance), Options{Logger: slog.New(slog.NewTextHandler(r.logs, nil)),
			Replica: replica.Tuning{Tick: 50 * time.Millisecond, Retry: 50 * time.Millisecond, CheckpointWait: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r.stop = func() { cancel(); <-r.done }
		go func() { defer close(r.done); _ = r.w.Run(ctx) }()
		t.Cleanup(r.stop)
		return r
	}
	admin, err := nats.Connect(natsURL, nats.UserInfo("admin", "admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ajs, _ := jetstream.New(admin)
	ctx := context.Background()
	events := func() (n uint64, last *jetstream.RawStreamMsg) {
		s, err := ajs.Stream(ctx, "ORDERS_A")
		if err != nil {
			return 0, nil
		}
		info, err := s.Info(ctx)
		if err != nil || info.State.Msgs == 0 {
			return 0, nil
		}
		last, _ = s.GetMsg(ctx, info.State.LastSeq)
		return info.State.Msgs, last
	}

	a1 := start("a1")
	e2e.WaitFor(t, "a1 active and its first sync published", 60*time.Second, func() bool {
		n, _ := events()
		return a1.w.rep.Active() && n >= 20
	})
	a2 := start("a2")
	e2e.WaitFor(t, "a2 mirroring the stream, with a1's snapshot dump", 60*time.Second, func() bool {
		st := a2.w.rep.Status()
		return st.Mirroring && st.CaughtUp && strings.Contains(a2.logs.String(), "loaded the active's snapshot")
	})
	a1.stop() // SIGTERM: the standby takes over
	e2e.WaitFor(t, "a2 active", 60*time.Second, func() bool { return a2.w.rep.Working() })
	id := sim.Orders()[0].ID
	if _, err := sim.SetStatus(id, "7"); err != nil {
		t.Fatal(err)
	}
	e2e.WaitFor(t, "a2's event", 60*time.Second, func() bool {
		_, last := events()
		return last != nil && strings.Contains(last.Subject, "status_changed") && last.Header.Get(shopid.Header) == "shop-a"
	})
	// watcher rescan with the shop's user: the active answers.
	ops, err := nats.Connect(natsURL, nats.UserInfo("shop-a", "pw-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer ops.Close()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if rep, err := replica.RequestRescan(rctx, ops, a2.w.rep.Key(), replica.RescanRequest{From: time.Now().Add(-time.Hour)}); err != nil || !rep.Accepted || rep.Instance != "a2" {
		t.Errorf("rescan: %+v, %v; want a2's acceptance", rep, err)
	}
	for name, r := range map[string]*run{"a1": a1, "a2": a2} {
		if l := r.logs.String(); strings.Contains(strings.ToLower(l), "permission") {
			t.Errorf("%s was refused something:\n%s", name, l)
		}
	}

	// Shop b's state, as its watcher leaves it.
	bkv, err := ajs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ow_b_checkpoint"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bkv.Put(ctx, "shop-b.ORDERS_B", []byte(`{"state":{}}`)); err != nil {
		t.Fatal(err)
	}
	bobs, err := ajs.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "ow_b_snapshot"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bobs.Put(ctx, jetstream.ObjectMeta{Name: "shop-b.ORDERS_B"}, bytes.NewReader([]byte("orders"))); err != nil {
		t.Fatal(err)
	}
	if _, err := ajs.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS_B", Subjects: []string{"orders_b.>"}}); err != nil {
		t.Fatal(err)
	}
	refused := make(chan error, 10)
	nc, err := nats.Connect(natsURL, nats.UserInfo("shop-a", "pw-a"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { refused <- err }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Second))
	if _, err := js.KeyValue(ctx, "ow_b_checkpoint"); err == nil {
		t.Error("shop a's user binds shop b's checkpoint bucket")
	}
	if msg, err := nc.Request("$JS.API.DIRECT.GET.KV_ow_b_checkpoint.$KV.ow_b_checkpoint.shop-b.ORDERS_B", nil, time.Second); err == nil {
		t.Errorf("shop a's user reads shop b's checkpoint: %q", msg.Data)
	}
	if _, err := js.ObjectStore(ctx, "ow_b_snapshot"); err == nil {
		t.Error("shop a's user binds shop b's snapshot store")
	}
	if _, err := js.Stream(ctx, "ORDERS_B"); err == nil {
		t.Error("shop a's user reads shop b's stream")
	}
	if _, err := nc.SubscribeSync("$KV.ow_b_checkpoint.>"); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	if !testnats.AwaitRefusal(refused, `Subscription to "$KV.ow_b_checkpoint.>"`, 5*time.Second) {
		t.Error("shop a's user subscribes to shop b's checkpoints")
	}
}

// TestPermissionsDocumented: the NATS user in docs/operations.md and the
// chart's README is NATSPermissions of its example shop, as a nats-server
// configuration (the README links it).
func TestPermissionsDocumented(t *testing.T) {
	c := testConfig(t, "https://p12345.my.plentysystems.com", "")
	c.ShopID, c.Stream, c.SubjectPrefix, c.LeaseBucket, c.Lease = "shop-a", "ORDERS_A", "orders_a", "orderwatch_a", true
	p := NATSPermissions(c)
	want := "```\n" + p.Conf("WATCHER_SHOP_ID=shop-a WATCHER_STREAM=ORDERS_A WATCHER_SUBJECT_PREFIX=orders_a WATCHER_LEASE_BUCKET=orderwatch_a",
		"orderwatch-shop-a", "SHOP_A_NATS_PASSWORD") + "```\n"
	for _, file := range []string{"../docs/operations.md", "../deploy/helm/orderwatch/README.md"} {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(doc), "<!-- nats-user:begin -->\n")
		block, _, ok2 := strings.Cut(rest, "<!-- nats-user:end -->")
		if !ok || !ok2 || block != want {
			t.Errorf("%s: the NATS user between the nats-user markers is not NATSPermissions; put there:\n%s", file, want)
		}
	}
	// And the server reads it so.
	conf := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(conf, []byte(strings.Trim(want, "`\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHOP_A_NATS_PASSWORD", "secret")
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Users) != 1 || opts.Users[0].Password != "secret" || opts.Users[0].Permissions.Response == nil ||
		!slices.Equal(opts.Users[0].Permissions.Publish.Allow, p.Publish) || !slices.Equal(opts.Users[0].Permissions.Subscribe.Allow, p.Subscribe) {
		t.Errorf("the server reads the documented user as %+v", opts.Users)
	}
}
