// Package pipeline is one shop's pipeline: the service client, the sweep
// (poller), the state file, the publisher to NATS and, with the lease, the
// hot-standby replica (package replica); plus its HTTP endpoints (/healthz,
// /readyz, /metrics, /state), its metrics and its state report. main only
// loads the configuration and wires it: New, Run, Close.
package pipeline

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/lease"
	"github.com/orderwatch/orderwatch/plenty/order"
	"github.com/orderwatch/orderwatch/poller"
	"github.com/orderwatch/orderwatch/publisher"
	"github.com/orderwatch/orderwatch/shopid"
)

// EnvPrefix is the prefix of every configuration variable.
const EnvPrefix = "WATCHER"

// Config is the whole configuration, read from the environment only. The
// README's configuration table is generated from these tags (a test fails
// when they drift).
type Config struct {
	PlentyURL          string        `envconfig:"PLENTY_URL" desc:"Base URL of the commerce REST service (https://shop.example); required"`
	ShopID             string        `envconfig:"SHOP_ID" desc:"The shop's name in NATS (lease and checkpoint keys, snapshot objects, the stream's owner, header Orderwatch-Shop): a-z, 0-9, - and _; default derived from the service URL"`
	PlentyUsername     string        `envconfig:"PLENTY_USERNAME" desc:"REST user; required"`
	PlentyPassword     string        `envconfig:"PLENTY_PASSWORD" desc:"REST password; required unless WATCHER_PLENTY_PASSWORD_FILE is set"`
	PlentyPasswordFile string        `envconfig:"PLENTY_PASSWORD_FILE" desc:"File holding the REST password (a mounted Secret)"`
	PlentyAPIVersion   int           `envconfig:"PLENTY_API_VERSION" default:"0" desc:"API version for Accept: application/x.<vendor>.v<N>+json; 0 = newest"`
	PlentyAPIVendor    string        `envconfig:"PLENTY_API_VENDOR" default:"service" desc:"Vendor token of the versioned Accept header"`
	PlentyTimeout      time.Duration `envconfig:"PLENTY_TIMEOUT" default:"30s" desc:"Timeout of one REST call, body included"`

	NATSURL          string `envconfig:"NATS_URL" default:"nats://127.0.0.1:4222" desc:"NATS server URL(s), comma-separated"`
	NATSUser         string `envconfig:"NATS_USER" desc:"NATS user"`
	NATSPassword     string `envconfig:"NATS_PASSWORD" desc:"NATS password"`
	NATSPasswordFile string `envconfig:"NATS_PASSWORD_FILE" desc:"File holding the NATS password"`
	NATSToken        string `envconfig:"NATS_TOKEN" desc:"NATS token"`
	NATSTokenFile    string `envconfig:"NATS_TOKEN_FILE" desc:"File holding the NATS token"`
	NATSCreds        string `envconfig:"NATS_CREDS" desc:"NATS .creds file (JWT + nkey)"`
	NATSNKey         string `envconfig:"NATS_NKEY" desc:"NATS nkey seed file"`
	NATSTLSCA        string `envconfig:"NATS_TLS_CA" desc:"CA file for NATS TLS"`
	NATSTLSCert      string `envconfig:"NATS_TLS_CERT" desc:"Client certificate file for NATS TLS"`
	NATSTLSKey       string `envconfig:"NATS_TLS_KEY" desc:"Client key file for NATS TLS"`

	Stream          string        `envconfig:"STREAM" default:"ORDERS" desc:"JetStream stream; empty = core NATS (nothing kept)"`
	StreamCreate    bool          `envconfig:"STREAM_CREATE" default:"true" desc:"Create the stream when it is missing"`
	DuplicateWindow time.Duration `envconfig:"DUPLICATE_WINDOW" default:"10m" desc:"Duplicate window of a created stream (dedup by Nats-Msg-Id)"`
	StreamMaxAge    time.Duration `envconfig:"STREAM_MAX_AGE" default:"0s" desc:"Retention of a created stream; 0 = unlimited"`
	StreamMaxBytes  int64         `envconfig:"STREAM_MAX_BYTES" default:"0" desc:"Size limit of a created stream; 0 = unlimited"`
	StreamReplicas  int           `envconfig:"STREAM_REPLICAS" default:"1" desc:"Replicas of a created stream"`
	SubjectPrefix   string        `envconfig:"SUBJECT_PREFIX" default:"orders" desc:"First subject token(s) of every event"`
	Source          string        `envconfig:"SOURCE" desc:"CloudEvents source; default the service URL"`
	PublishInFlight int           `envconfig:"PUBLISH_MAX_INFLIGHT" default:"256" desc:"Publishes awaiting their PubAck"`

	StatePath string `envconfig:"STATE_PATH" default:"/var/lib/orderwatch/state.db" desc:"bbolt state file (watermark, token, snapshot, outbox)"`
	OutboxMax int    `envconfig:"OUTBOX_MAX" default:"100000" desc:"Outbox entries at most; when full the sweep pauses"`

	PollInterval   time.Duration `envconfig:"POLL_INTERVAL" desc:"Time between the starts of two sweeps (the floor when set); unset: derived from the call budget and the measured cost of a sweep (2.08 s for a one-call sweep at 0.25 of 166,000 calls a day; 5 s until the service names its daily limit)"`
	Settle         time.Duration `envconfig:"SETTLE" desc:"A sweep reads up to server time minus this; unset: derived from the measured late arrivals (90th percentile of their lag, 1s..30s)"`
	Overlap        time.Duration `envconfig:"OVERLAP" desc:"Each sweep re-reads this much before the watermark (late commits); unset: derived from the measured late arrivals (twice the latest, 10s..10m; a sweep every 5 min reads 10m back)"`
	StartFrom      StartFrom     `envconfig:"START_FROM" default:"720h" desc:"First sweep starts here: RFC 3339 time or a duration back from now"`
	BaselineEvents bool          `envconfig:"BASELINE_EVENTS" default:"false" desc:"Emit events for the orders the first sweep records"`
	EmitUpdated    bool          `envconfig:"EMIT_UPDATED" default:"false" desc:"Emit order.updated for every updatedAt change"`
	CallShare      float64       `envconfig:"CALL_SHARE" default:"0.25" desc:"Share of the daily call quota the sweeps may use in the long run (a budget with an hour's burst); sweeps slow smoothly when it runs low"`
	Scope          string        `envconfig:"SCOPE" desc:"Scope filters in query form, e.g. orderTypeId=1&statusId=in:5,6"`
	ScopeJSON      string        `envconfig:"SCOPE_JSON" desc:"Complex scope filter (JSON group); searches POST when a part of it goes to the service"`
	With           []string      `envconfig:"WITH" desc:"Relations to load (with=), comma-separated"`
	LazyLoaded     bool          `envconfig:"LAZY_LOADED" default:"false" desc:"Load the default relations"`
	ItemsPerPage   int           `envconfig:"ITEMS_PER_PAGE" default:"250" desc:"Requested page size (the service may cap it)"`
	SlicePages     int           `envconfig:"SLICE_PAGES" default:"4" desc:"Most pages per verified time slice"`
	Keyset         string        `envconfig:"KEYSET" default:"auto" desc:"Page a one-second bulk that offset paging cannot verify by orderId=gt:: auto (falls back when the service ignores the filter), true or false"`
	BadEntries     string        `envconfig:"BAD_ENTRIES" default:"quarantine" desc:"Undecodable entry: quarantine (hold back only its order, retry it by id; alias hold) or skip"`

	// Hot standby (one active replica per shop and stream; docs/how-it-works.md, "Hot standby").
	Lease       bool          `envconfig:"LEASE" default:"true" desc:"Hot standby: only the replica holding the NATS KV lease of its shop and stream calls the shop and publishes; the others mirror the stream (JetStream only)"`
	InstanceID  string        `envconfig:"INSTANCE_ID" desc:"Name of this replica in the lease; default the host name (the pod name)"`
	LeaseTTL    time.Duration `envconfig:"LEASE_TTL" default:"9s" desc:"Lease time to live of a created lease bucket (an existing bucket keeps its own); renewed every third of it, a standby takes over within it after a crash"`
	LeaseBucket string        `envconfig:"LEASE_BUCKET" default:"orderwatch" desc:"Name prefix of the NATS buckets <name>_lease, <name>_checkpoint (KV) and <name>_snapshot (object store)"`
	// LeaseReplicas: 0 follows the stream's replicas.
	LeaseReplicas int `envconfig:"LEASE_REPLICAS" default:"0" desc:"Replicas of those buckets (an existing bucket is changed to them); 0 = the stream's"`

	// Fleet mode (package fleet; docs: "Many shops in one deployment").
	ShopsFile string `envconfig:"SHOPS_FILE" desc:"Fleet mode when set: the registry of shops (JSON, package shops), read every second and applied live; the replicas share the shops through one lease per shop. WATCHER_PLENTY_* are then ignored"`
	StateDir  string `envconfig:"STATE_DIR" default:"/var/lib/orderwatch/shops" desc:"Fleet mode: the directory of the shops' state files (<dir>/<shop id>.db)"`

	HTTPAddr        string        `envconfig:"HTTP_ADDR" default:":9090" desc:"Listen address of /healthz, /readyz and /metrics"`
	LogFormat       string        `envconfig:"LOG_FORMAT" default:"json" desc:"json or text"`
	LogLevel        string        `envconfig:"LOG_LEVEL" default:"info" desc:"debug, info, warn or error"`
	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"20s" desc:"On SIGTERM: time to flush the outbox before exit"`
}

// leaseBucketName: the characters of a NATS bucket name.
var leaseBucketName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// StartFrom is an absolute time or a duration back from the start.
type StartFrom struct {
	At   time.Time
	Back time.Duration
}

// Decode implements envconfig.Decoder.
func (s *StartFrom) Decode(v string) error {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		*s = StartFrom{At: t}
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("want an RFC 3339 time or a positive duration like 720h, got %q", v)
	}
	*s = StartFrom{Back: d}
	return nil
}

// Time resolves the start against now.
func (s StartFrom) Time(now time.Time) time.Time {
	if !s.At.IsZero() {
		return s.At
	}
	return now.Add(-s.Back)
}

// ConfigError is a configuration mistake; the process exits with status 2.
type ConfigError struct{ msg string }

func (e *ConfigError) Error() string { return e.msg }

// ConfigErrorf is a ConfigError with a formatted message.
func ConfigErrorf(format string, args ...any) error {
	return &ConfigError{msg: fmt.Sprintf(format, args...)}
}

// Validate checks the configuration; every error names the variable.
func (c *Config) Validate() error {
	switch {
	case c.PlentyURL == "":
		return ConfigErrorf("%s_PLENTY_URL is required (the service's base URL)", EnvPrefix)
	case c.PlentyUsername == "":
		return ConfigErrorf("%s_PLENTY_USERNAME is required", EnvPrefix)
	case c.PlentyPassword == "":
		return ConfigErrorf("%s_PLENTY_PASSWORD (or %s_PLENTY_PASSWORD_FILE) is required", EnvPrefix, EnvPrefix)
	}
	if c.ShopID != "" {
		if err := shopid.Valid(c.ShopID); err != nil {
			return ConfigErrorf("%s_SHOP_ID=%q: %v", EnvPrefix, c.ShopID, err)
		}
	}
	if u, err := url.Parse(c.PlentyURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ConfigErrorf("%s_PLENTY_URL=%q: want http(s)://host", EnvPrefix, c.PlentyURL)
	}
	positive := []struct {
		name string
		d    time.Duration
	}{{"PLENTY_TIMEOUT", c.PlentyTimeout}, {"SHUTDOWN_TIMEOUT", c.ShutdownTimeout}}
	for _, p := range positive {
		if p.d <= 0 {
			return ConfigErrorf("%s_%s=%s: must be positive", EnvPrefix, p.name, p.d)
		}
	}
	// Unset (0) timings are derived (see poller.Budget.Pace, poller.Timings).
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{"POLL_INTERVAL", c.PollInterval}, {"SETTLE", c.Settle}, {"OVERLAP", c.Overlap}} {
		if p.d < 0 {
			return ConfigErrorf("%s_%s=%s: must be positive (or unset: derived)", EnvPrefix, p.name, p.d)
		}
	}
	if c.Stream != "" && c.DuplicateWindow <= 0 {
		return ConfigErrorf("%s_DUPLICATE_WINDOW=%s: must be positive with JetStream (it is what drops re-sent events)", EnvPrefix, c.DuplicateWindow)
	}
	if c.Lease && c.Stream != "" && (c.LeaseTTL < 2*time.Second || !leaseBucketName.MatchString(c.LeaseBucket)) {
		return ConfigErrorf("%s_LEASE_TTL=%s, %s_LEASE_BUCKET=%q: want a TTL of at least 2s and a bucket name of letters, digits, '-' and '_'", EnvPrefix, c.LeaseTTL, EnvPrefix, c.LeaseBucket)
	}
	if c.LeaseReplicas < 0 {
		return ConfigErrorf("%s_LEASE_REPLICAS=%d: want 0 (the stream's) or more", EnvPrefix, c.LeaseReplicas)
	}
	if c.CallShare <= 0 || c.CallShare > 1 {
		return ConfigErrorf("%s_CALL_SHARE=%v: want a share in (0, 1]", EnvPrefix, c.CallShare)
	}
	if c.ItemsPerPage < 1 || c.SlicePages < 1 || c.OutboxMax < 0 || c.PublishInFlight < 1 || c.StreamReplicas < 1 {
		return ConfigErrorf("%s_ITEMS_PER_PAGE, _SLICE_PAGES, _PUBLISH_MAX_INFLIGHT and _STREAM_REPLICAS must be at least 1, _OUTBOX_MAX not negative", EnvPrefix)
	}
	if err := diff.ValidPrefix(c.SubjectPrefix); err != nil {
		return ConfigErrorf("%s_SUBJECT_PREFIX=%q: %v", EnvPrefix, c.SubjectPrefix, err)
	}
	switch poller.KeysetMode(c.Keyset) {
	case poller.KeysetAuto, poller.KeysetOn, poller.KeysetOff:
	default:
		return ConfigErrorf("%s_KEYSET=%q: want auto, true or false", EnvPrefix, c.Keyset)
	}
	switch poller.BadEntryPolicy(c.BadEntries) {
	case poller.BadEntryQuarantine, poller.BadEntryHold, poller.BadEntrySkip:
	default:
		return ConfigErrorf("%s_BAD_ENTRIES=%q: want quarantine (alias hold) or skip", EnvPrefix, c.BadEntries)
	}
	if err := validAddr(c.HTTPAddr); err != nil {
		return ConfigErrorf("%s_HTTP_ADDR=%q: %v", EnvPrefix, c.HTTPAddr, err)
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		return ConfigErrorf("%s_LOG_FORMAT=%q: want json or text", EnvPrefix, c.LogFormat)
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		return ConfigErrorf("%s_LOG_LEVEL=%q: %v", EnvPrefix, c.LogLevel, err)
	}
	if _, err := c.ScopeSplit(); err != nil {
		return err
	}
	return nil
}

// validAddr checks a listen address: [host]:port, the port a number up to
// 65535 or a service name.
func validAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port or :port (%v)", err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// Shop is the shop's id in force: WATCHER_SHOP_ID, or derived from the
// service URL (shopid.FromURL).
func (c *Config) Shop() string { return shopid.Resolve(c.ShopID, c.PlentyURL) }

// GroupKey is the key of this shop's hot-standby group: its lease,
// checkpoint and snapshot dump (lease.Key of the shop id and the stream).
func (c *Config) GroupKey() string { return lease.Key(c.Shop(), c.Stream) }

// LegacyGroupKey is the group's key before shop ids (lease.Key of the
// service URL and the stream): a group whose state is under it keeps it
// (replica.GroupKey).
func (c *Config) LegacyGroupKey() string { return lease.Key(c.PlentyURL, c.Stream) }

// EventSource is the events' CloudEvents source: WATCHER_SOURCE, default
// the service URL.
func (c *Config) EventSource() string {
	if c.Source != "" {
		return c.Source
	}
	return c.PlentyURL
}

// ScopeSplit parses WATCHER_SCOPE and WATCHER_SCOPE_JSON and splits them between
// the service (filters on fields that never change) and orderwatch (the
// rest, evaluated on before and after so that an order leaving the scope is
// published); see diff.SplitScope.
func (c *Config) ScopeSplit() (diff.ScopeSplit, error) {
	fs, err := c.scopeFilters()
	if err != nil {
		return diff.ScopeSplit{}, err
	}
	g, err := c.scopeGroup()
	if err != nil {
		return diff.ScopeSplit{}, err
	}
	if _, err := diff.SplitScope(fs, nil); err != nil {
		return diff.ScopeSplit{}, ConfigErrorf("%s_SCOPE: %v", EnvPrefix, err)
	}
	sp, err := diff.SplitScope(fs, g)
	if err != nil {
		return diff.ScopeSplit{}, ConfigErrorf("%s_SCOPE_JSON: %v", EnvPrefix, err)
	}
	return sp, nil
}

// scopeFilters parses WATCHER_SCOPE: name=op:value pairs joined by &.
func (c *Config) scopeFilters() ([]order.Filter, error) {
	if strings.TrimSpace(c.Scope) == "" {
		return nil, nil
	}
	vals, err := url.ParseQuery(c.Scope)
	if err != nil {
		return nil, ConfigErrorf("%s_SCOPE=%q: %v", EnvPrefix, c.Scope, err)
	}
	var fs []order.Filter
	for name, vs := range vals {
		if len(vs) != 1 {
			return nil, ConfigErrorf("%s_SCOPE: filter %s given %d times; combine conditions on one field with WATCHER_SCOPE_JSON", EnvPrefix, name, len(vs))
		}
		f, err := order.ParseFilter(name, vs[0])
		if err != nil {
			return nil, ConfigErrorf("%s_SCOPE: %v", EnvPrefix, err)
		}
		fs = append(fs, f)
	}
	slices.SortFunc(fs, func(a, b order.Filter) int { return strings.Compare(a.Field, b.Field) })
	q := order.Query{Filters: fs}
	if err := q.Validate(); err != nil {
		return nil, ConfigErrorf("%s_SCOPE: %v", EnvPrefix, err)
	}
	return fs, nil
}

func (c *Config) scopeGroup() (*order.Group, error) {
	if strings.TrimSpace(c.ScopeJSON) == "" {
		return nil, nil
	}
	g, err := order.ParseGroup([]byte(c.ScopeJSON))
	if err != nil {
		return nil, ConfigErrorf("%s_SCOPE_JSON: %v", EnvPrefix, err)
	}
	return g, nil
}

// ScopeSentText renders the part of the scope sent to the service, "" for none.
func ScopeSentText(sp diff.ScopeSplit) string {
	var sent []string
	for _, f := range sp.Sent {
		sent = append(sent, diff.FilterString(f))
	}
	if sp.SentGroup != nil {
		b, _ := json.Marshal(sp.SentGroup)
		sent = append(sent, "complex "+string(b))
	}
	return strings.Join(sent, " and ")
}

// ParseLevel reads a log level: debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("want debug, info, warn or error")
	}
	return l, nil
}

// NATS is the connection to NATS the configuration names, for the
// process called name (the pipeline, check, rescan).
func (c *Config) NATS(name string) publisher.ConnConfig {
	return publisher.ConnConfig{
		URL: c.NATSURL, Name: name, User: c.NATSUser, Password: c.NATSPassword, Token: c.NATSToken,
		CredsFile: c.NATSCreds, NKeyFile: c.NATSNKey, TLSCA: c.NATSTLSCA, TLSCert: c.NATSTLSCert, TLSKey: c.NATSTLSKey,
	}
}
