package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/orderwatch/orderwatch/diff"
	"github.com/orderwatch/orderwatch/plenty"
	"github.com/orderwatch/orderwatch/poller"
)

// envPrefix is the prefix of every configuration variable.
const envPrefix = "WATCHER"

// Config is the whole configuration, read from the environment only. The
// README's configuration table is generated from these tags (a test fails
// when they drift).
type Config struct {
	PlentyURL          string        `envconfig:"PLENTY_URL" desc:"Base URL of the commerce REST service (https://shop.example); required"`
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

	Stream          string        `envconfig:"STREAM" default:"ORDERS" desc:"JetStream stream; empty = core NATS (at-most-once)"`
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
	Settle         time.Duration `envconfig:"SETTLE" desc:"A sweep reads up to server time minus this; unset: derived from the measured late arrivals (90th percentile of their lag, 2s..30s)"`
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

func configErr(format string, args ...any) error {
	return &ConfigError{msg: fmt.Sprintf(format, args...)}
}

// LoadConfig reads the configuration from the process environment and
// checks it. Every error names the variable.
func LoadConfig() (*Config, error) {
	c, err := envConfig()
	if err != nil {
		return nil, err
	}
	if err := c.readFiles(); err != nil {
		return nil, err
	}
	return c, c.validate()
}

// envConfig reads the configuration from the environment without checking
// it (`watcher state` needs only the state path and the HTTP address, not
// the service's credentials). A value that does not parse is an error
// naming the variable.
func envConfig() (*Config, error) {
	var c Config
	if err := envconfig.Process(envPrefix, &c); err != nil {
		var pe *envconfig.ParseError
		if errors.As(err, &pe) {
			// KeyName is the whole variable name, prefix included.
			return nil, configErr("%s=%q: %v", pe.KeyName, pe.Value, pe.Err)
		}
		return nil, configErr("%v", err)
	}
	return &c, nil
}

// knownVars lists every variable the configuration reads (WATCHER_...).
func knownVars() []string {
	t := reflect.TypeFor[Config]()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if key := t.Field(i).Tag.Get("envconfig"); key != "" {
			names = append(names, envPrefix+"_"+key)
		}
	}
	return names
}

// unknownVar is a WATCHER_* variable the configuration does not read, and
// the known variable closest to it.
type unknownVar struct{ name, closest string }

// unknownVars finds the WATCHER_* variables of environ (os.Environ's form)
// that the configuration does not know: a misspelt variable is otherwise
// silently ignored. Only names are looked at, never values (secrets).
func unknownVars(environ []string) []unknownVar {
	known := knownVars()
	var out []unknownVar
	for _, name := range setVars(environ) {
		if slices.Contains(known, name) {
			continue
		}
		closest := slices.MinFunc(known, func(a, b string) int {
			return editDistance(name, a) - editDistance(name, b)
		})
		out = append(out, unknownVar{name: name, closest: closest})
	}
	return out
}

// setVars lists the WATCHER_* variables set in environ (os.Environ's form),
// sorted; names only.
func setVars(environ []string) []string {
	var names []string
	for _, kv := range environ {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, envPrefix+"_") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// unknownVarsText says what is wrong with each unknown variable of the
// process environment, one line each.
func unknownVarsText() []string {
	var lines []string
	for _, u := range unknownVars(os.Environ()) {
		lines = append(lines, fmt.Sprintf("%s is not a variable the watcher knows (ignored); the closest known one is %s", u.name, u.closest))
	}
	return lines
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// readFiles resolves the _FILE variants of secrets (Kubernetes Secrets mounted as files).
func (c *Config) readFiles() error {
	for _, f := range []struct {
		name      string
		file      string
		dst       *string
		valueName string
	}{
		{"PLENTY_PASSWORD_FILE", c.PlentyPasswordFile, &c.PlentyPassword, "PLENTY_PASSWORD"},
		{"NATS_PASSWORD_FILE", c.NATSPasswordFile, &c.NATSPassword, "NATS_PASSWORD"},
		{"NATS_TOKEN_FILE", c.NATSTokenFile, &c.NATSToken, "NATS_TOKEN"},
	} {
		if f.file == "" {
			continue
		}
		if *f.dst != "" {
			return configErr("%s_%s and %s_%s are both set; use one", envPrefix, f.valueName, envPrefix, f.name)
		}
		b, err := os.ReadFile(f.file)
		if err != nil {
			return configErr("%s_%s: %v", envPrefix, f.name, err)
		}
		*f.dst = strings.TrimRight(string(b), "\r\n")
	}
	return nil
}

func (c *Config) validate() error {
	switch {
	case c.PlentyURL == "":
		return configErr("%s_PLENTY_URL is required (the service's base URL)", envPrefix)
	case c.PlentyUsername == "":
		return configErr("%s_PLENTY_USERNAME is required", envPrefix)
	case c.PlentyPassword == "":
		return configErr("%s_PLENTY_PASSWORD (or %s_PLENTY_PASSWORD_FILE) is required", envPrefix, envPrefix)
	}
	if u, err := url.Parse(c.PlentyURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return configErr("%s_PLENTY_URL=%q: want http(s)://host", envPrefix, c.PlentyURL)
	}
	positive := []struct {
		name string
		d    time.Duration
	}{{"PLENTY_TIMEOUT", c.PlentyTimeout}, {"SHUTDOWN_TIMEOUT", c.ShutdownTimeout}}
	for _, p := range positive {
		if p.d <= 0 {
			return configErr("%s_%s=%s: must be positive", envPrefix, p.name, p.d)
		}
	}
	// Unset (0) timings are derived (see poller.Budget.Pace, poller.Timings).
	for _, p := range []struct {
		name string
		d    time.Duration
	}{{"POLL_INTERVAL", c.PollInterval}, {"SETTLE", c.Settle}, {"OVERLAP", c.Overlap}} {
		if p.d < 0 {
			return configErr("%s_%s=%s: must be positive (or unset: derived)", envPrefix, p.name, p.d)
		}
	}
	if c.Stream != "" && c.DuplicateWindow <= 0 {
		return configErr("%s_DUPLICATE_WINDOW=%s: must be positive with JetStream (it is what drops re-sent events)", envPrefix, c.DuplicateWindow)
	}
	if c.Lease && c.Stream != "" && (c.LeaseTTL < 2*time.Second || !leaseBucketName.MatchString(c.LeaseBucket)) {
		return configErr("%s_LEASE_TTL=%s, %s_LEASE_BUCKET=%q: want a TTL of at least 2s and a bucket name of letters, digits, '-' and '_'", envPrefix, c.LeaseTTL, envPrefix, c.LeaseBucket)
	}
	if c.CallShare <= 0 || c.CallShare > 1 {
		return configErr("%s_CALL_SHARE=%v: want a share in (0, 1]", envPrefix, c.CallShare)
	}
	if c.ItemsPerPage < 1 || c.SlicePages < 1 || c.OutboxMax < 0 || c.PublishInFlight < 1 || c.StreamReplicas < 1 {
		return configErr("%s_ITEMS_PER_PAGE, _SLICE_PAGES, _PUBLISH_MAX_INFLIGHT and _STREAM_REPLICAS must be at least 1, _OUTBOX_MAX not negative", envPrefix)
	}
	if err := diff.ValidPrefix(c.SubjectPrefix); err != nil {
		return configErr("%s_SUBJECT_PREFIX=%q: %v", envPrefix, c.SubjectPrefix, err)
	}
	switch poller.KeysetMode(c.Keyset) {
	case poller.KeysetAuto, poller.KeysetOn, poller.KeysetOff:
	default:
		return configErr("%s_KEYSET=%q: want auto, true or false", envPrefix, c.Keyset)
	}
	switch poller.BadEntryPolicy(c.BadEntries) {
	case poller.BadEntryQuarantine, poller.BadEntryHold, poller.BadEntrySkip:
	default:
		return configErr("%s_BAD_ENTRIES=%q: want quarantine (alias hold) or skip", envPrefix, c.BadEntries)
	}
	if err := validAddr(c.HTTPAddr); err != nil {
		return configErr("%s_HTTP_ADDR=%q: %v", envPrefix, c.HTTPAddr, err)
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		return configErr("%s_LOG_FORMAT=%q: want json or text", envPrefix, c.LogFormat)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return configErr("%s_LOG_LEVEL=%q: %v", envPrefix, c.LogLevel, err)
	}
	if _, err := c.scope(); err != nil {
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

// scope parses WATCHER_SCOPE and WATCHER_SCOPE_JSON and splits them between
// the service (filters on fields that never change) and orderwatch (the
// rest, evaluated on before and after so that an order leaving the scope is
// published); see diff.SplitScope.
func (c *Config) scope() (diff.ScopeSplit, error) {
	fs, err := c.scopeFilters()
	if err != nil {
		return diff.ScopeSplit{}, err
	}
	g, err := c.scopeGroup()
	if err != nil {
		return diff.ScopeSplit{}, err
	}
	if _, err := diff.SplitScope(fs, nil); err != nil {
		return diff.ScopeSplit{}, configErr("%s_SCOPE: %v", envPrefix, err)
	}
	sp, err := diff.SplitScope(fs, g)
	if err != nil {
		return diff.ScopeSplit{}, configErr("%s_SCOPE_JSON: %v", envPrefix, err)
	}
	return sp, nil
}

// scopeFilters parses WATCHER_SCOPE: name=op:value pairs joined by &.
func (c *Config) scopeFilters() ([]plenty.Filter, error) {
	if strings.TrimSpace(c.Scope) == "" {
		return nil, nil
	}
	vals, err := url.ParseQuery(c.Scope)
	if err != nil {
		return nil, configErr("%s_SCOPE=%q: %v", envPrefix, c.Scope, err)
	}
	var fs []plenty.Filter
	for name, vs := range vals {
		if len(vs) != 1 {
			return nil, configErr("%s_SCOPE: filter %s given %d times; combine conditions on one field with WATCHER_SCOPE_JSON", envPrefix, name, len(vs))
		}
		f, err := plenty.ParseFilter(name, vs[0])
		if err != nil {
			return nil, configErr("%s_SCOPE: %v", envPrefix, err)
		}
		fs = append(fs, f)
	}
	slices.SortFunc(fs, func(a, b plenty.Filter) int { return strings.Compare(a.Field, b.Field) })
	q := plenty.Query{Filters: fs}
	if err := q.Validate(); err != nil {
		return nil, configErr("%s_SCOPE: %v", envPrefix, err)
	}
	return fs, nil
}

func (c *Config) scopeGroup() (*plenty.Group, error) {
	if strings.TrimSpace(c.ScopeJSON) == "" {
		return nil, nil
	}
	g, err := plenty.ParseGroup([]byte(c.ScopeJSON))
	if err != nil {
		return nil, configErr("%s_SCOPE_JSON: %v", envPrefix, err)
	}
	return g, nil
}

// scopeSentText renders the part of the scope sent to the service, "" for none.
func scopeSentText(sp diff.ScopeSplit) string {
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

// usageFormat renders envconfig's usage as the README's Markdown table.
const usageFormat = `| Variable | Default | Description |
|---|---|---|
{{range .}}| ` + "`{{usage_key .}}`" + ` | {{with usage_default .}}` + "`{{.}}`" + `{{end}} | {{usage_description .}} |
{{end}}`

// writeUsage prints the configuration table (watcher help; the README's table).
func writeUsage(w io.Writer) error {
	return envconfig.Usagef(envPrefix, &Config{}, w, usageFormat)
}
