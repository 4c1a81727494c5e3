// Package shopid is a shop's identity in NATS: the short name that scopes
// every name the watcher owns there (lease and checkpoint keys, snapshot
// objects, the owner recorded in the stream's metadata) and that every
// published message carries in the Orderwatch-Shop header. It is explicit
// (WATCHER_SHOP_ID) or derived from the service's URL (FromURL). Standard
// library only: the pipeline, the replica, the mirror, the publisher and a
// fleet of shops import it.
package shopid

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
)

// Header is the message header naming the shop that published an event
// (its ID); a standby mirrors only its own shop's events.
const Header = "Orderwatch-Shop"

// MaxLen is the longest shop id.
const MaxLen = 48

// Valid checks an explicit shop id: 1 to MaxLen characters, lower-case
// letters, digits, '-' and '_', starting with a letter or digit. Such a
// name is one token of a NATS subject and a valid key, object, bucket and
// stream name part.
func Valid(id string) error {
	if id == "" || len(id) > MaxLen {
		return fmt.Errorf("want 1 to %d characters, got %d", MaxLen, len(id))
	}
	for i, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case (r == '-' || r == '_') && i > 0:
		default:
			return fmt.Errorf("character %q at %d: want lower-case letters, digits, '-' and '_' (not first)", r, i)
		}
	}
	return nil
}

// FromURL derives a shop id from the service's base URL: the host (with
// its port, if any) and path, lower-cased, every character other than a
// letter, a digit or '-' written as '_' (https://p12345.my.plentysystems.com
// -> p12345_my_plentysystems_com). The scheme, a trailing '/' and user
// information do not count, so the id stays the same when only those
// change. An id longer than MaxLen keeps its first 39 characters and adds
// '_' and 8 hex digits of a hash of the whole: stable and still distinct.
func FromURL(raw string) string {
	s := strings.ToLower(strings.TrimSpace(raw))
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		s = u.Host + u.Path
	} else {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://")
	}
	s = strings.TrimRight(s, "/")
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	id := strings.TrimLeft(b.String(), "-_")
	if id == "" {
		id = "shop"
	}
	if len(id) > MaxLen {
		sum := sha256.Sum256([]byte(id))
		id = id[:39] + "_" + hex.EncodeToString(sum[:4])
	}
	return id
}

// Resolve is the shop id in force: explicit when set, else FromURL(url).
func Resolve(explicit, url string) string {
	if explicit != "" {
		return explicit
	}
	return FromURL(url)
}
