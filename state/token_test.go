package state

import "github.com/orderwatch/orderwatch/plenty"

// The store keeps the client's session across restarts. The check lives in a
// test so that state does not import the HTTP client.
var _ plenty.TokenStore = (*Store)(nil)
