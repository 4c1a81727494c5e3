package fleet

import (
	"strings"

	"github.com/orderwatch/orderwatch/pipeline"
	"github.com/orderwatch/orderwatch/replica"
	"github.com/orderwatch/orderwatch/shops"
)

// NATSPermissions are the permissions of a NATS user for every member of
// the fleet configured by base (the WATCHER_* variables) with the shops
// of registry: each member may run every shop. They are the single-shop
// ones (pipeline.NATSPermissions) of the fleet's stream, subject prefix
// and buckets, with wildcards where the fleet's own names suffice:
//
//   - the events: <WATCHER_SUBJECT_PREFIX>.> covers every shop without a
//     subject prefix of its own (<prefix>.<id>);
//   - the rescan requests: orderwatch.rescan.*.<stream> are those of
//     every group on the fleet's stream (a group's key is <shop>.<stream>,
//     replica.RescanSubject; the fleet owns its stream, so no group of
//     another fleet or single-shop watcher is on it);
//   - the members bucket <WATCHER_LEASE_BUCKET>_fleet.
//
// A shop with a stream or a subject prefix of its own (its registry
// entry's "stream", "subjectPrefix" outside the fleet's) adds its own
// lines: the user must then be made again from the registry. The server
// must also allow responses (allow_responses). TestFleetLeastPrivilege
// runs a member with exactly these against a server enforcing them.
func NATSPermissions(base *pipeline.Config, registry []shops.Shop) pipeline.Permissions {
	var p pipeline.Permissions
	add := func(c *pipeline.Config) {
		q := pipeline.NATSPermissions(c)
		key := c.GroupKey()
		exact, wild := replica.RescanSubject(key), replica.RescanSubject("*"+key[strings.LastIndex(key, "."):])
		for _, l := range []struct{ to, from *[]string }{{&p.Publish, &q.Publish}, {&p.Subscribe, &q.Subscribe}} {
			for _, s := range *l.from {
				if s == exact {
					s = wild
				}
				if !coveredBy(s, *l.to) {
					*l.to = append(*l.to, s)
				}
			}
		}
	}
	c := *base
	c.Lease = true
	if c.ShopID == "" && c.PlentyURL == "" {
		c.ShopID = "fleet" // any: its rescan subject becomes the stream's wildcard
	}
	add(&c)
	members := base.LeaseBucket + "_fleet"
	p.Publish = append(p.Publish, pipeline.JetStreamSubjects("KV_"+members)...)
	p.Publish = append(p.Publish, "$KV."+members+".>")
	for _, s := range registry {
		sc := *base
		sc.Lease = true
		shopNames(&sc, s)
		add(&sc)
	}
	return p
}

// coveredBy says whether a subject (wildcards allowed) is within one of
// the patterns: every subject it matches, one of them matches.
func coveredBy(subject string, patterns []string) bool {
	st := strings.Split(subject, ".")
	for _, p := range patterns {
		if covers(strings.Split(p, "."), st) {
			return true
		}
	}
	return false
}

func covers(pattern, subject []string) bool {
	for i, t := range pattern {
		switch {
		case t == ">":
			return len(subject) > i
		case i >= len(subject), subject[i] == ">", t != "*" && t != subject[i]:
			return false
		}
	}
	return len(pattern) == len(subject)
}
