package publisher

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnConfig configures the NATS connection of Connect.
type ConnConfig struct {
	URL                    string        // e.g. nats://127.0.0.1:4222; a comma-separated list is allowed
	Name                   string        // connection name shown by the server; default "orderwatch"
	User, Password         string        // user/password authentication
	Token                  string        // token authentication
	CredsFile              string        // .creds file (JWT + nkey seed)
	NKeyFile               string        // nkey seed file
	TLSCA, TLSCert, TLSKey string        // file paths; TLSCert and TLSKey go together
	ReconnectWait          time.Duration // base wait between reconnects (jittered by up to half of it); default 2s
	Logger                 *slog.Logger
	// OnConnectError, when set, is told the cause of each failed attempt
	// to (re)connect (the first connect included).
	OnConnectError func(error)
	// NoRetryAtStart makes Connect fail when no server can be reached at
	// the first connect (one pass over the servers), instead of retrying
	// in the background: for a command that wants an answer (`watcher
	// check`), never for the daemon. Refused connections come back as
	// nats.ErrNoServers.
	NoRetryAtStart bool
}

// Connect dials NATS. It never gives up: reconnects are unlimited and a
// server that is down at start-up is retried in the background
// (RetryOnFailedConnect), so Connect fails only on a configuration mistake
// (bad URL, unreadable creds or nkey file, half a TLS client pair), or,
// with NoRetryAtStart, when no server answers the first connect.
//
// The reconnect buffer is disabled: while disconnected a publish fails at
// once instead of being buffered in memory and sent, possibly much later,
// after the reconnect. The publisher keeps every entry in the outbox until
// its PubAck anyway, so the buffer would only hold stale copies.
//
// Disconnects, reconnects, the close and asynchronous errors (permission
// violations, slow consumer) are logged as one line each; URLs are logged
// with their credentials redacted, secrets never.
func Connect(cfg ConnConfig) (*nats.Conn, error) {
	if cfg.URL == "" {
		return nil, errors.New("nats: no server URL")
	}
	if cfg.Name == "" {
		cfg.Name = "orderwatch"
	}
	if cfg.ReconnectWait <= 0 {
		cfg.ReconnectWait = 2 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "nats")
	auth, err := cfg.authOptions()
	if err != nil {
		return nil, err
	}
	opts := append([]nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(!cfg.NoRetryAtStart),
		nats.ReconnectWait(cfg.ReconnectWait),
		nats.ReconnectJitter(cfg.ReconnectWait/2, cfg.ReconnectWait/2),
		nats.ReconnectBufSize(-1),
	}, cfg.logOptions(log)...)
	nc, err := nats.Connect(cfg.URL, append(opts, auth...)...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect: %w", err)
	}
	if !nc.IsConnected() {
		log.Warn("NATS not reachable yet; retrying in the background", "servers", redactedServers(nc))
	}
	return nc, nil
}

// logOptions log the connection's changes, one line each.
func (cfg ConnConfig) logOptions(log *slog.Logger) []nats.Option {
	var lastConnErr string // callbacks run one at a time (nats.go's async callback queue)
	return []nats.Option{
		nats.ConnectHandler(func(nc *nats.Conn) {
			lastConnErr = ""
			log.Info("NATS connected", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
		}),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected", "err", err)
			} else {
				log.Info("NATS disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			lastConnErr = ""
			log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted(), "server", nc.ConnectedServerName())
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				log.Warn("NATS connection closed", "err", err)
			} else {
				log.Info("NATS connection closed")
			}
		}),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			// Logged when the cause changes, not on every attempt.
			if msg := err.Error(); msg != lastConnErr {
				lastConnErr = msg
				log.Warn("NATS connect failed; retrying", "url", RedactURL(cfg.URL), "err", err)
			}
			if cfg.OnConnectError != nil {
				cfg.OnConnectError(err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Error("NATS asynchronous error", "subject", sub.Subject, "err", err)
				return
			}
			log.Error("NATS asynchronous error", "err", err)
		}),
	}
}

// authOptions return the credentials' and TLS options, or the configuration
// mistake that prevents them.
func (cfg ConnConfig) authOptions() ([]nats.Option, error) {
	var opts []nats.Option
	switch {
	case cfg.CredsFile != "" && cfg.NKeyFile != "":
		return nil, errors.New("nats: give a creds file or an nkey seed file, not both")
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	case cfg.NKeyFile != "":
		o, err := nats.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			// The error names the file, never its content.
			return nil, fmt.Errorf("nats: nkey seed file %s: %w", cfg.NKeyFile, err)
		}
		opts = append(opts, o)
	}
	if cfg.User != "" || cfg.Password != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		opts = append(opts, nats.Token(cfg.Token))
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, errors.New("nats: a TLS client certificate needs both the certificate and the key file")
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.TLSCert != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	return opts, nil
}

// redactedServers lists the configured servers without credentials.
func redactedServers(nc *nats.Conn) []string {
	var out []string
	for _, s := range nc.Servers() {
		out = append(out, RedactURL(s))
	}
	return out
}

// RedactURL hides the user and password of a URL for logs; a list of
// comma-separated URLs is redacted one by one.
func RedactURL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = redactOne(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func redactOne(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	return u.String()
}
