package lease

// NoLimitMarkers creates a lease bucket as on a server without per-key TTL
// markers (before NATS 2.11), on a server that has them.
func NoLimitMarkers() BucketOption { return func(o *bucketOptions) { o.noMarkers = true } }
