package publisher_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/publisher"
)

func TestEnsureStream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st := openStore(t, false)

	// Each subtest has a server of its own: streams with overlapping
	// subjects cannot coexist, and re-creating a just deleted stream races
	// with the server's removal of its files.
	var js jetstream.JetStream
	var fresh func(t *testing.T, cfg publisher.Config) *publisher.Publisher
	setup := func(t *testing.T) {
		t.Helper()
		srv := runServer(t, nil)
		nc := connect(t, srv.url())
		_, js = plainConn(t, srv.url())
		fresh = func(t *testing.T, cfg publisher.Config) *publisher.Publisher {
			t.Helper()
			cfg.Logger = testLogger(t)
			p, err := publisher.New(nc, st, cfg)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
	}
	create := func(t *testing.T, cfg jetstream.StreamConfig) {
		t.Helper()
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("creates a missing stream", func(t *testing.T) {
		setup(t)
		p := fresh(t, publisher.Config{Stream: "CREATED", CreateStream: true, SubjectPrefix: "shop1.orders",
			DuplicateWindow: 7 * time.Minute, MaxAge: 48 * time.Hour, MaxBytes: 1 << 30})
		if err := p.EnsureStream(ctx); err != nil {
			t.Fatal(err)
		}
		s, err := js.Stream(ctx, "CREATED")
		if err != nil {
			t.Fatal(err)
		}
		c := s.CachedInfo().Config
		if len(c.Subjects) != 1 || c.Subjects[0] != "shop1.orders.>" || c.Storage != jetstream.FileStorage ||
			c.Duplicates != 7*time.Minute || c.MaxAge != 48*time.Hour || c.MaxBytes != 1<<30 || c.Replicas != 1 {
			t.Errorf("created %+v", c)
		}
		// Idempotent: the second call verifies what the first created.
		if err := p.EnsureStream(ctx); err != nil {
			t.Errorf("second EnsureStream: %v", err)
		}
	})

	for _, tc := range []struct {
		name     string
		prefix   string
		subjects []string
	}{
		{"exact subject", "orders", []string{"orders.>"}},
		{"one of several subjects", "orders", []string{"invoices.>", "orders.>"}},
		{"wider wildcard", "shop1.orders", []string{"shop1.>"}},
		{"wider wildcard in the middle", "shop1.orders", []string{"shop1.*.>"}},
	} {
		t.Run("accepts an existing stream with "+tc.name, func(t *testing.T) {
			setup(t)
			create(t, jetstream.StreamConfig{Name: "GOOD", Subjects: tc.subjects, Duplicates: time.Minute})
			p := fresh(t, publisher.Config{Stream: "GOOD", SubjectPrefix: tc.prefix}) // CreateStream off: must not matter
			if err := p.EnsureStream(ctx); err != nil {
				t.Errorf("EnsureStream: %v", err)
			}
		})
	}

	t.Run("missing stream without CreateStream", func(t *testing.T) {
		setup(t)
		p := fresh(t, publisher.Config{Stream: "NOPE"})
		err := p.EnsureStream(ctx)
		if !errors.Is(err, publisher.ErrStream) || !errors.Is(err, jetstream.ErrStreamNotFound) || !strings.Contains(err.Error(), `"NOPE"`) || !strings.Contains(err.Error(), "does not exist") {
			t.Errorf("EnsureStream = %v", err)
		}
		if _, err := js.Stream(ctx, "NOPE"); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("stream was created: %v", err)
		}
	})

	for _, tc := range []struct {
		name     string
		subjects []string
	}{
		{"other subjects", []string{"invoices.>"}},
		{"a narrower wildcard", []string{"orders.*"}},
		{"part of the events only", []string{"orders.created.>", "orders.status_changed.>"}},
	} {
		t.Run("stream with "+tc.name, func(t *testing.T) {
			setup(t)
			create(t, jetstream.StreamConfig{Name: "WRONG", Subjects: tc.subjects, Duplicates: time.Minute})
			p := fresh(t, publisher.Config{Stream: "WRONG", CreateStream: true})
			err := p.EnsureStream(ctx)
			if !errors.Is(err, publisher.ErrStream) || !strings.Contains(err.Error(), `"orders.>"`) || !strings.Contains(err.Error(), "captures") {
				t.Errorf("EnsureStream = %v", err)
			}
		})
	}

	t.Run("stream without duplicate window", func(t *testing.T) {
		setup(t)
		// JetStream gives every stream a window, except one that sources
		// others and sets none.
		create(t, jetstream.StreamConfig{Name: "UPSTREAM", Subjects: []string{"up.>"}})
		create(t, jetstream.StreamConfig{Name: "NODEDUP", Subjects: []string{"orders.>"}, Sources: []*jetstream.StreamSource{{Name: "UPSTREAM"}}})
		s, err := js.Stream(ctx, "NODEDUP")
		if err != nil {
			t.Fatal(err)
		}
		if w := s.CachedInfo().Config.Duplicates; w != 0 {
			t.Skipf("server gave the stream a duplicate window of %v", w)
		}
		err = fresh(t, publisher.Config{Stream: "NODEDUP"}).EnsureStream(ctx)
		if !errors.Is(err, publisher.ErrStream) || !strings.Contains(err.Error(), "duplicate window") {
			t.Errorf("EnsureStream = %v", err)
		}
	})

	t.Run("subjects overlapping another stream", func(t *testing.T) {
		setup(t)
		create(t, jetstream.StreamConfig{Name: "THEIRS", Subjects: []string{"orders.>"}, Duplicates: time.Minute})
		err := fresh(t, publisher.Config{Stream: "MINE", CreateStream: true}).EnsureStream(ctx)
		if !errors.Is(err, publisher.ErrStream) || !strings.Contains(err.Error(), "overlapping") {
			t.Errorf("EnsureStream = %v", err)
		}
	})
}

func TestEnsureStreamWithoutJetStreamPermission(t *testing.T) {
	srv := runServer(t, func(o *server.Options) {
		o.Users = []*server.User{
			{Username: "admin", Password: "admin-pw"},
			{Username: "app", Password: "app-pw", Permissions: &server.Permissions{
				Publish:   &server.SubjectPermission{Allow: []string{"orders.>"}},
				Subscribe: &server.SubjectPermission{Allow: []string{"_INBOX.>"}},
			}},
		}
	})
	nc := connect(t, srv.url(), func(c *publisher.ConnConfig) { c.User, c.Password = "app", "app-pw" })
	p, err := publisher.New(nc, openStore(t, false), publisher.Config{Stream: stream, CreateStream: true, AckTimeout: 500 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = p.EnsureStream(ctx)
	if !errors.Is(err, publisher.ErrStream) || !strings.Contains(err.Error(), "may not use the JetStream API") {
		t.Errorf("EnsureStream = %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "app-pw") {
		t.Error("error shows the password")
	}
}

func TestEnsureStreamJetStreamDisabled(t *testing.T) {
	srv := runServer(t, func(o *server.Options) { o.JetStream = false })
	p, err := publisher.New(connect(t, srv.url()), openStore(t, false), publisher.Config{Stream: stream, CreateStream: true, AckTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = p.EnsureStream(ctx)
	if err == nil || !strings.Contains(err.Error(), "JetStream is not enabled") {
		t.Errorf("EnsureStream = %v", err)
	}
}
