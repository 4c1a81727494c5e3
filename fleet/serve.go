package fleet

import (
	"context"
	"log/slog"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/shops"
)

// ValidateBase checks the configuration a fleet's shops start from: every
// variable of one shop's pipeline but the service's (each shop names its
// own), plus the registry file, the state directory and a stream.
func ValidateBase(base *pipeline.Config) error {
	c := *base
	c.PlentyURL, c.PlentyUsername, c.PlentyPassword, c.PlentyPasswordFile = "https://shop.invalid", "-", "-", ""
	if err := c.Validate(); err != nil {
		return err
	}
	switch {
	case base.ShopsFile == "":
		return pipeline.ConfigErrorf("%s_SHOPS_FILE is required in fleet mode", pipeline.EnvPrefix)
	case base.StateDir == "":
		return pipeline.ConfigErrorf("%s_STATE_DIR is required in fleet mode", pipeline.EnvPrefix)
	case base.Stream == "" || !base.Lease:
		return pipeline.ConfigErrorf("fleet mode needs JetStream (%s_STREAM) and the lease (%s_LEASE=true): the shops are shared out by their leases", pipeline.EnvPrefix, pipeline.EnvPrefix)
	}
	return nil
}

// ServeOptions are what Serve gets besides the configuration.
type ServeOptions struct {
	Logger *slog.Logger
	// Registry receives the fleet's metrics and each shop's (with its
	// shop label) and is what /metrics serves.
	Registry interface {
		prometheus.Registerer
		prometheus.Gatherer
	}
	Version string
	Getenv  func(string) string // the shops' passwordEnv [os.Getenv]
	// Ready, when set, is called once the HTTP address listens (tests).
	Ready func(addr string)
}

// Serve is the daemon of fleet mode (watcher run with WATCHER_SHOPS_FILE):
// it checks the configuration and the registry file (an unusable file at
// the start is a *pipeline.ConfigError), connects to NATS, serves
// /healthz, /readyz, /metrics, /state and /shops/{id}/... on
// WATCHER_HTTP_ADDR, applies the registry live and runs this member until
// ctx ends; then every shop is given up (flushed, checkpointed, released)
// and it returns.
func Serve(ctx context.Context, base *pipeline.Config, opt ServeOptions) error {
	if err := ValidateBase(base); err != nil {
		return err
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opt.Registry == nil {
		opt.Registry = prometheus.NewRegistry()
	}
	if opt.Getenv == nil {
		opt.Getenv = os.Getenv
	}
	host, _ := os.Hostname()
	instance := base.InstanceID
	if instance == "" {
		instance = host
	}
	shared, err := pipeline.NewHost(NewHostConfig(*base, nil, base.HTTPAddr, log))
	if err != nil {
		return err
	}
	defer shared.Close()
	f, err := New(Config{
		Shared: shared, Instance: instance, Host: host, Base: *base, StateDir: base.StateDir, Getenv: opt.Getenv,
		Logger: log, Registerer: opt.Registry, Gatherer: opt.Registry, Version: opt.Version,
	})
	if err != nil {
		return err
	}
	reg := shops.NewWatcher(base.ShopsFile, f.RegistryOptions(log))
	first := reg.Load()
	if first.FileErr != nil {
		return pipeline.ConfigErrorf("%s_SHOPS_FILE: %v", pipeline.EnvPrefix, first.FileErr)
	}
	f.Apply(first)
	shared.Serve(f.Handler())
	log.Info("orderwatch fleet member started", "version", opt.Version, "instance", instance, "shops", len(first.Shops),
		"invalid_entries", len(first.Invalid), "registry", base.ShopsFile, "state_dir", base.StateDir, "http", shared.Addr())
	if opt.Ready != nil {
		opt.Ready(shared.Addr())
	}
	var wg sync.WaitGroup
	rctx, stopRegistry := context.WithCancel(ctx)
	wg.Go(func() { reg.Run(rctx, f.Apply) })
	err = f.Run(ctx) // returns early when this member is refused (clash)
	stopRegistry()
	wg.Wait()
	log.Info("fleet member stopped")
	return err
}
