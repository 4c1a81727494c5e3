package plenty

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// The session moves with the shop. The token is kept in the state file
// of the process that opened it (TokenStore), which does not travel: a
// replica or fleet member that takes the shop over would log in again, and
// a login never ends an earlier session, so a shop taken over a few times
// within a token's life (a day) reaches the shop's session limit. So the
// client also keeps a sealed copy of its token as an ordinary record
// (SealedSessionRecord), which the group's checkpoint carries to a
// successor; a client that starts without a live token of its own that
// outlasts it opens it and goes on with that session: no login, no new
// session.
//
// The copy is as secret as the password: AES-256-GCM with a key derived
// (HKDF-SHA256) from the shop's password, salted with the shop's identity
// (service URL and username, also bound as additional data), and a random
// nonce per seal. Without the password the record in NATS is useless; a
// rotated password, another shop's record or a damaged one fails to open,
// and the client logs in as it would without it.

// SealedSessionRecord is the name of the sealed copy of the session token.
const SealedSessionRecord = "session.sealed"

// sealedVersion is the form of the record this version writes and opens.
const sealedVersion = 1

// sealedSession is the JSON of the SealedSessionRecord record. Box is the
// sealed JSON of the token; nothing of the token is in clear.
type sealedSession struct {
	V     int    `json:"v"`
	Nonce []byte `json:"nonce"`
	Box   []byte `json:"box"`
}

// sealedToken is the sealed plaintext (order.Token has no JSON tags of its
// own to rely on).
type sealedToken struct {
	AccessToken  string    `json:"a"`
	RefreshToken string    `json:"r,omitempty"`
	TokenType    string    `json:"t,omitempty"`
	ExpiresAt    time.Time `json:"e"`
}

// errSealed is what every failure to open a sealed session wraps: the
// reason is never more precise (GCM does not say whether the key or the
// bytes were wrong).
var errSealed = errors.New("the sealed session does not open (another password or shop, or a damaged record)")

// sealer seals and opens the session of one shop and user.
type sealer struct {
	aead cipher.AEAD
	ad   []byte // the shop's identity, bound to every box
}

// newSealer derives the key from password, salted with the shop's identity
// (base URL without /rest, username).
func newSealer(password, baseURL, username string) (*sealer, error) {
	id := []byte(baseURL + "\n" + username)
	key, err := hkdf.Key(sha256.New, []byte(password), id, "orderwatch session.sealed v1", 32)
	if err != nil {
		return nil, fmt.Errorf("derive the session key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead, ad: id}, nil
}

// seal returns the record of t.
func (s *sealer) seal(t order.Token) (sealedSession, error) {
	plain, err := json.Marshal(sealedToken(t))
	if err != nil {
		return sealedSession{}, err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return sealedSession{}, err
	}
	return sealedSession{V: sealedVersion, Nonce: nonce, Box: s.aead.Seal(nil, nonce, plain, s.ad)}, nil
}

// open returns the token of a record sealed for this shop with this
// password; any other record is errSealed.
func (s *sealer) open(r sealedSession) (order.Token, error) {
	if r.V != sealedVersion || len(r.Nonce) != s.aead.NonceSize() {
		return order.Token{}, errSealed
	}
	plain, err := s.aead.Open(nil, r.Nonce, r.Box, s.ad)
	if err != nil {
		return order.Token{}, errSealed
	}
	var t sealedToken
	if json.Unmarshal(plain, &t) != nil || t.AccessToken == "" {
		return order.Token{}, errSealed
	}
	return order.Token(t), nil
}

// saveSealed keeps a sealed copy of t for the group (the zero Token
// removes it: a successor must not take up a session this client knows
// ended). sessMu held.
func (c *Client) saveSealed(t order.Token) {
	if c.cfg.Sessions == nil || c.sealer == nil {
		return
	}
	var v any // nil deletes the record
	if t != (order.Token{}) {
		r, err := c.sealer.seal(t)
		if err != nil {
			c.log.Warn("could not seal the session for the group; a replica taking the shop over will log in", "err", err)
			return
		}
		v = r
	}
	if err := c.cfg.Sessions.SaveRecord(SealedSessionRecord, v); err != nil {
		c.log.Warn("could not save the sealed session; a replica taking the shop over will log in", "err", err)
	}
}

// takeSealed goes on with the session of the sealed record (one this
// client or another replica of the shop's group saved) when it is live and
// the client holds no live token that outlasts it: the session the group
// last used, so no login and no new session (sessMu held, once, after
// loadGuard). The session is not a new one: it has served calls, so a 401
// to it drops it and logs in once, and it is counted by nobody as a
// session without a token (the guard counts only those; its previous
// holder gave it up with the shop). When the client keeps a live token of
// its own that the record does not hold (a record of an earlier password,
// none yet after an upgrade, an older session), it seals that one, so that
// the next takeover finds it without waiting for a login or renewal.
func (c *Client) takeSealed(ctx context.Context) {
	if c.cfg.Sessions == nil || c.sealer == nil {
		return
	}
	now := c.now()
	t := c.openSealed()
	switch {
	case t.AccessToken == c.token.AccessToken:
		return
	case !t.Valid(now, 0) || c.token.Valid(now, 0) && !t.ExpiresAt.After(c.token.ExpiresAt):
		if c.token.Valid(now, 0) {
			c.saveSealed(c.token)
		}
		return
	}
	c.token = t
	c.fresh.Store(false)
	c.logins.rejectedSince = time.Time{}
	if err := c.cfg.Tokens.SaveToken(ctx, t); err != nil {
		c.log.Warn("could not persist the session token; a restart will open the sealed one again", "err", err)
	}
	c.log.Info("going on with the shop's session from the group's state: no login", "expires_at", t.ExpiresAt.Format(time.RFC3339))
}

// openSealed returns the token of the sealed record, the zero Token when
// there is none or it does not open.
func (c *Client) openSealed() order.Token {
	var r sealedSession
	found, err := c.cfg.Sessions.LoadRecord(SealedSessionRecord, &r)
	if err != nil || !found || r.V == 0 && len(r.Box) == 0 {
		if err != nil {
			c.log.Warn("the sealed session of the group is unreadable; not used", "err", err)
		}
		return order.Token{}
	}
	t, err := c.sealer.open(r)
	if err != nil {
		c.log.Warn("the sealed session of the group does not open (a rotated password, another shop's record, or damaged); not used", "err", err)
	}
	return t
}
