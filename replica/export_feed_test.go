package replica

import "github.com/nats-io/nats.go/jetstream"

// FollowLimitsFeed is LimitsFeed.follow for the tests.
func FollowLimitsFeed(f *LimitsFeed, key string, take func(jetstream.KeyValueEntry)) (unregister func()) {
	return f.follow(key, take)
}
