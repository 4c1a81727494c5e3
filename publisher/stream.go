package publisher

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrStream is matched (errors.Is) by every error of EnsureStream about the
// stream itself: missing, misconfigured, or not accessible. Such an error
// needs an operator; retrying does not help.
var ErrStream = errors.New("stream unusable")

// streamError is an error for the operator: what is wrong and how to fix it.
type streamError struct {
	msg   string
	cause error
}

func (e *streamError) Error() string {
	if e.cause != nil {
		return e.msg + ": " + e.cause.Error()
	}
	return e.msg
}

func (e *streamError) Unwrap() []error {
	if e.cause != nil {
		return []error{ErrStream, e.cause}
	}
	return []error{ErrStream}
}

func (p *Publisher) streamErr(cause error, format string, args ...any) error {
	return &streamError{msg: fmt.Sprintf("stream %q: ", p.cfg.Stream) + fmt.Sprintf(format, args...), cause: cause}
}

// EnsureStream checks the stream, creating it when it is missing and
// Config.CreateStream is set: subjects "<prefix>.>", file storage, the
// duplicate window, MaxAge, MaxBytes and Replicas of the Config. An existing
// stream must capture "<prefix>.>" with one of its subjects (the subject
// itself or a wildcard covering it, like ">" or "<prefix>.>") and have a
// duplicate window, or exactly-once delivery is lost; the stream's window
// applies (a different Config.DuplicateWindow is logged). In core NATS mode it does nothing.
//
// Errors about the stream (missing with CreateStream off, wrong subjects, no
// duplicate window, a mirror, no permission to use the JetStream API,
// JetStream not enabled) match ErrStream and say how to fix them. Other
// errors (NATS down, timeouts) are transient.
func (p *Publisher) EnsureStream(ctx context.Context) error {
	if p.js == nil {
		return nil
	}
	want := p.cfg.SubjectPrefix + ".>"
	s, err := p.lookup(ctx)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if !p.cfg.CreateStream {
			return p.streamErr(err, "does not exist and creating it is disabled: create it with subject %q and a duplicate window "+
				"(e.g. nats stream add %s --subjects %q --storage file --dupe-window %v), or enable stream creation",
				want, p.cfg.Stream, want, p.cfg.DuplicateWindow)
		}
		s, err = p.createStream(ctx, want)
		if err != nil {
			return err
		}
	} else if err != nil {
		return p.apiError("look up", err)
	}
	info := s.CachedInfo()
	if err := p.checkStream(info, want); err != nil {
		return err
	}
	if info, err = p.claim(ctx, s, info); err != nil {
		return err
	}
	// The window that applies is the stream's, whatever the Config says.
	p.window.Store(int64(info.Config.Duplicates))
	p.stream.Store(s)
	p.ensured.Store(true)
	return nil
}

// lookup fetches the stream's info. Each JetStream API request waits at
// most AckTimeout: a denied request is never answered, and a caller's long
// deadline should not delay that error.
func (p *Publisher) lookup(ctx context.Context) (jetstream.Stream, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.AckTimeout)
	defer cancel()
	return p.js.Stream(ctx, p.cfg.Stream)
}

func (p *Publisher) createStream(ctx context.Context, want string) (jetstream.Stream, error) {
	cfg := jetstream.StreamConfig{
		Name:        p.cfg.Stream,
		Description: "orderwatch order change events (CloudEvents; Nats-Msg-Id = <shop>:<event id>)",
		Subjects:    []string{want},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Duplicates:  p.cfg.DuplicateWindow,
		MaxAge:      p.cfg.MaxAge,
		MaxBytes:    p.cfg.MaxBytes,
		Replicas:    p.cfg.Replicas,
		Metadata:    p.owner(),
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = -1
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.AckTimeout)
	defer cancel()
	s, err := p.js.CreateStream(cctx, cfg)
	switch {
	case errors.Is(err, jetstream.ErrStreamNameAlreadyInUse):
		// Created meanwhile by someone else: check that one.
		s, err = p.lookup(ctx)
		if err != nil {
			return nil, p.apiError("look up", err)
		}
		return s, nil
	case err != nil:
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeSubjectOverlap {
			return nil, p.streamErr(err, "cannot be created: another stream already captures subjects overlapping %q; "+
				"use that stream (set the stream name to it) or change the subject prefix", want)
		}
		return nil, p.apiError("create", err)
	}
	info := s.CachedInfo()
	p.log.Info("created stream", "stream", p.cfg.Stream, "subjects", info.Config.Subjects,
		"duplicate_window", info.Config.Duplicates.String(), "max_age", info.Config.MaxAge.String(),
		"max_bytes", info.Config.MaxBytes, "replicas", info.Config.Replicas)
	return s, nil
}

// The stream's owner: the shop whose watcher created or first used it,
// in the stream's metadata (NATS 2.10 on).
const (
	MetaShop    = "orderwatch.shop"     // the shop's id
	MetaShopURL = "orderwatch.shop_url" // the service URL
)

// ErrOtherShop is matched by the error of EnsureStream when the stream
// belongs to another shop (with ErrStream).
var ErrOtherShop = errors.New("the stream belongs to another shop")

// OwnerError: the stream's metadata names another shop.
type OwnerError struct {
	Stream, Owner, OwnerURL, Shop, ShopURL string
}

func (e *OwnerError) Error() string {
	return fmt.Sprintf("stream %q belongs to the shop %s (%s), this watcher serves the shop %s (%s): "+
		"give each shop its own stream and subject prefix (WATCHER_STREAM, WATCHER_SUBJECT_PREFIX)",
		e.Stream, e.Owner, e.OwnerURL, e.Shop, e.ShopURL)
}

func (e *OwnerError) Unwrap() []error { return []error{ErrStream, ErrOtherShop} }

// owner is the metadata naming this shop, or the fleet that owns the
// stream (nil without a shop).
func (p *Publisher) owner() map[string]string {
	if p.ownerName() == "" {
		return nil
	}
	if p.cfg.StreamOwner != "" {
		return map[string]string{MetaShop: p.cfg.StreamOwner}
	}
	return map[string]string{MetaShop: p.cfg.Shop, MetaShopURL: p.cfg.ShopURL}
}

// ownerName is who the stream must belong to: Config.StreamOwner, else
// the shop.
func (p *Publisher) ownerName() string {
	if p.cfg.StreamOwner != "" {
		return p.cfg.StreamOwner
	}
	return p.cfg.Shop
}

// claim checks the stream's owner: another shop's stream is refused
// (*OwnerError); a stream without an owner (created by hand or by an
// earlier version) is claimed for this shop, and read again: of two
// shops claiming it at once, the one whose claim was written last owns
// it, the other is refused once it reads the stream again (at its next
// start or failure). A claim the server refuses (no permission to update
// the stream) is logged and the stream used without an owner.
func (p *Publisher) claim(ctx context.Context, s jetstream.Stream, info *jetstream.StreamInfo) (*jetstream.StreamInfo, error) {
	if p.ownerName() == "" {
		return info, nil
	}
	if err := p.checkOwner(info); err != nil || info.Config.Metadata[MetaShop] != "" {
		return info, err
	}
	cfg := info.Config
	meta := make(map[string]string, len(cfg.Metadata)+2)
	for k, v := range cfg.Metadata {
		meta[k] = v
	}
	for k, v := range p.owner() {
		meta[k] = v
	}
	cfg.Metadata = meta
	uctx, cancel := context.WithTimeout(ctx, p.cfg.AckTimeout)
	defer cancel()
	if _, err := p.js.UpdateStream(uctx, cfg); err != nil {
		p.log.Warn("the stream has no owner and this watcher could not record its shop in the stream's metadata; "+
			"another shop's watcher could use it too: allow $JS.API.STREAM.UPDATE."+p.cfg.Stream+", or set the metadata yourself",
			"stream", p.cfg.Stream, "shop", p.cfg.Shop, "metadata", MetaShop, "err", err)
		return info, nil
	}
	now, err := s.Info(uctx)
	if err != nil {
		return nil, p.apiError("look up", err)
	}
	if err := p.checkOwner(now); err != nil {
		return now, err
	}
	p.log.Info("the stream had no owner: recorded this shop in its metadata", "stream", p.cfg.Stream, "shop", p.cfg.Shop)
	return now, nil
}

func (p *Publisher) checkOwner(info *jetstream.StreamInfo) error {
	owner := info.Config.Metadata[MetaShop]
	if owner == "" || owner == p.ownerName() {
		return nil
	}
	return &OwnerError{Stream: p.cfg.Stream, Owner: owner, OwnerURL: info.Config.Metadata[MetaShopURL], Shop: p.cfg.Shop, ShopURL: p.cfg.ShopURL}
}

// checkStream verifies an existing stream's configuration.
func (p *Publisher) checkStream(info *jetstream.StreamInfo, want string) error {
	cfg := info.Config
	if cfg.Mirror != nil {
		return p.streamErr(nil, "is a mirror of %q and takes no publishes: use a stream with subject %q", cfg.Mirror.Name, want)
	}
	covered := false
	for _, sub := range cfg.Subjects {
		if subjectCovers(sub, want) {
			covered = true
			break
		}
	}
	if !covered {
		return p.streamErr(nil, "has subjects %q, none of which captures %q: add %q to the stream's subjects "+
			"(nats stream edit %s --subjects ...), or set the subject prefix to one the stream captures",
			cfg.Subjects, want, want, p.cfg.Stream)
	}
	if cfg.Duplicates <= 0 {
		return p.streamErr(nil, "has no duplicate window, so a resent event (after a crash or an outage) would be stored twice: "+
			"set one (nats stream edit %s --dupe-window %v)", p.cfg.Stream, p.cfg.DuplicateWindow)
	}
	if cfg.Duplicates != p.cfg.DuplicateWindow {
		p.log.Info("the stream's duplicate window applies, not the configured one: events that may be stored already and are resent later than half of it are looked up in the stream first",
			"stream", p.cfg.Stream, "stream_window", cfg.Duplicates.String(), "configured_window", p.cfg.DuplicateWindow.String())
	}
	return nil
}

// apiError classifies a failed JetStream API request.
func (p *Publisher) apiError(op string, err error) error {
	switch {
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return p.streamErr(err, "%s: JetStream is not enabled on the NATS server or for this account: enable it, or use core NATS mode (no stream)", op)
	}
	if errors.Is(err, nats.ErrNoResponders) {
		// Not ErrStream: JetStream may be starting up.
		return fmt.Errorf("stream %q: %s: no JetStream answered: JetStream is not enabled on the NATS server or for this account "+
			"(or is starting): enable it, or use core NATS mode (no stream): %w", p.cfg.Stream, op, err)
	}
	// A denied publish to the JetStream API is reported asynchronously by
	// the server; the request itself only times out.
	if le := p.nc.LastError(); le != nil && errors.Is(le, nats.ErrPermissionViolation) &&
		(strings.Contains(le.Error(), "$JS.API") || strings.Contains(le.Error(), "_INBOX")) {
		return p.streamErr(le, "%s: the NATS user may not use the JetStream API: allow it to publish to $JS.API.> "+
			"(at least $JS.API.STREAM.INFO.%s and, to create the stream, $JS.API.STREAM.CREATE.%s) "+
			"and to subscribe to _INBOX.>", op, p.cfg.Stream, p.cfg.Stream)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code >= 400 && apiErr.Code < 500 {
		return p.streamErr(err, "%s refused by JetStream", op)
	}
	return fmt.Errorf("stream %q: %s: %w", p.cfg.Stream, op, notConnected(err))
}

// errCodeSubjectOverlap is JetStream's error code "subjects overlap with an
// existing stream" (nats.go has no constant for it).
const errCodeSubjectOverlap jetstream.ErrorCode = 10065

// subjectCovers reports whether filter (a subject that may hold the
// wildcards '*' and '>') matches every subject that sub matches.
func subjectCovers(filter, sub string) bool {
	ft := strings.Split(filter, ".")
	st := strings.Split(sub, ".")
	for i, f := range ft {
		if f == ">" {
			return i < len(st) // '>' matches one or more remaining tokens
		}
		if i >= len(st) {
			return false
		}
		s := st[i]
		switch {
		case s == ">":
			return false // sub matches more tokens than filter
		case f == "*":
			// any single token, '*' included
		case s == "*", f != s:
			return false
		}
	}
	return len(ft) == len(st)
}
