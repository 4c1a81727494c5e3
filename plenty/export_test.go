package plenty

import (
	"encoding/json"

	"github.com/orderwatch/orderwatch/plenty/order"
)

// SealForTest seals t as a client of baseURL and username with password
// would (the record's JSON).
func SealForTest(password, baseURL, username string, t order.Token) ([]byte, error) {
	s, err := newSealer(password, baseURL, username)
	if err != nil {
		return nil, err
	}
	r, err := s.seal(t)
	if err != nil {
		return nil, err
	}
	return json.Marshal(r)
}

// OpenForTest opens a record's JSON as such a client would.
func OpenForTest(password, baseURL, username string, rec []byte) (order.Token, error) {
	s, err := newSealer(password, baseURL, username)
	if err != nil {
		return order.Token{}, err
	}
	var r sealedSession
	if err := json.Unmarshal(rec, &r); err != nil {
		return order.Token{}, err
	}
	return s.open(r)
}
