package state

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// storedToken is the token's encoding in meta.
type storedToken struct {
	AccessToken  string    `json:"accessToken"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	TokenType    string    `json:"tokenType,omitempty"`
	ExpiresAt    time.Time `json:"expiresAt"`
}

// LoadToken returns the persisted session token, or the zero Token. It
// implements plenty.TokenStore (checked in token_test.go: state does not
// import the HTTP client).
func (s *Store) LoadToken(ctx context.Context) (order.Token, error) {
	if err := ctx.Err(); err != nil {
		return order.Token{}, err
	}
	var t order.Token
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get(keyToken)
		if v == nil {
			return nil
		}
		var st storedToken
		if err := json.Unmarshal(v, &st); err != nil {
			return corruptError(s.path, fmt.Errorf("token: %w", err))
		}
		t = order.Token(st)
		return nil
	})
	if err != nil {
		return order.Token{}, fmt.Errorf("load token from state file %s: %w", s.path, err)
	}
	return t, nil
}

// SaveToken persists the session token; the zero Token clears it.
func (s *Store) SaveToken(ctx context.Context, t order.Token) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.update(false, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if t == (order.Token{}) {
			return meta.Delete(keyToken)
		}
		v, err := json.Marshal(storedToken(t))
		if err != nil {
			return err
		}
		return meta.Put(keyToken, v)
	})
	if err != nil {
		return fmt.Errorf("save token to state file %s: %w", s.path, err)
	}
	return nil
}
