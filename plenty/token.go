package plenty

import (
	"context"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// TokenStore persists the session across restarts so that a restart reuses it
// instead of opening a new session (the service allows only a few at once).
type TokenStore interface {
	// LoadToken returns the stored token, or the zero Token when there is none.
	LoadToken(ctx context.Context) (order.Token, error)
	// SaveToken stores the token; the zero Token clears it.
	SaveToken(ctx context.Context, t order.Token) error
}

// MemoryTokenStore keeps the token in memory only (tests, the demo).
type MemoryTokenStore struct{ t order.Token }

func (m *MemoryTokenStore) LoadToken(context.Context) (order.Token, error)   { return m.t, nil }
func (m *MemoryTokenStore) SaveToken(_ context.Context, t order.Token) error { m.t = t; return nil }
