package pipeline

import (
	"strings"

	"github.com/orderwatch/orderwatch/replica"
)

// Permissions are the NATS subjects a watcher of one shop needs to
// publish and subscribe to, and nothing of another shop's when each shop
// has its own stream (WATCHER_STREAM), subject prefix
// (WATCHER_SUBJECT_PREFIX) and bucket prefix (WATCHER_LEASE_BUCKET). The
// server must also allow responses (allow_responses: the active answers
// rescan requests). docs/operations.md shows them as a NATS user;
// TestLeastPrivilege runs two replicas with exactly these against a
// server that enforces them. A fleet's members: fleet.NATSPermissions.
type Permissions struct {
	Publish, Subscribe []string
}

// NATSPermissions are the permissions of the watchers configured by c.
// The JetStream API requests name the stream they act on ($JS.API.<kind>.
// <op>.<stream>[.…]): allowed for the events stream (without delete and
// purge) and the buckets' streams KV_<bucket>_lease, KV_<bucket>_checkpoint
// and OBJ_<bucket>_snapshot, whose data subjects ($KV.…, $O.…) and flow
// control ($JS.FC.…) follow.
func NATSPermissions(c *Config) Permissions {
	s := c.Stream
	p := Permissions{
		Publish: []string{
			c.SubjectPrefix + ".>",                                                                 // the events
			"$JS.API.INFO",                                                                         // watcher check: the server's JetStream level
			"$JS.API.STREAM.INFO." + s, "$JS.API.STREAM.CREATE." + s, "$JS.API.STREAM.UPDATE." + s, // the stream, its owner
			"$JS.API.STREAM.MSG.GET." + s, "$JS.API.DIRECT.GET." + s + ".>", // look-ups before a late re-send
			"$JS.API.CONSUMER.CREATE." + s + ".>", "$JS.API.CONSUMER.MSG.NEXT." + s + ".>", // the standby's ordered consumer
			"$JS.API.CONSUMER.DELETE." + s + ".>",
		},
		Subscribe: []string{"_INBOX.>"},
	}
	if !c.Lease || s == "" {
		return p
	}
	b := c.LeaseBucket
	p.Publish = append(p.Publish, JetStreamSubjects("KV_"+b+"_lease", "KV_"+b+"_checkpoint", "OBJ_"+b+"_snapshot")...)
	rescan := replica.RescanSubject(c.GroupKey())
	p.Publish = append(p.Publish, "$KV."+b+"_lease.>", "$KV."+b+"_checkpoint.>", "$O."+b+"_snapshot.>", rescan)
	p.Subscribe = append(p.Subscribe, rescan)
	return p
}

// JetStreamSubjects are the subjects that use the streams named (a KV
// bucket's KV_<bucket>, an object store's OBJ_<bucket>): every JetStream
// API request on them and their flow control. The data subjects ($KV.…,
// $O.…) are not among them.
func JetStreamSubjects(streams ...string) []string {
	var out []string
	for _, st := range streams {
		out = append(out, "$JS.API.*.*."+st, "$JS.API.*.*."+st+".>", "$JS.FC."+st+".>")
	}
	return out
}

// Conf is p as a NATS user in a nats-server configuration file, after a
// comment line: the password is the environment variable passwordVar
// (nats-server reads $NAME from the environment), responses allowed.
func (p Permissions) Conf(comment, user, passwordVar string) string {
	list := func(subjects []string) string {
		return `"` + strings.Join(subjects, "\",\n        \"") + `"`
	}
	return "# " + comment + "\nauthorization { users = [ {\n  user: " + user + ", password: $" + passwordVar + "\n  permissions: {\n" +
		"    publish: { allow: [\n        " + list(p.Publish) + "\n    ] }\n" +
		"    subscribe: { allow: [" + list(p.Subscribe) + "] }\n" +
		"    allow_responses: true\n  }\n} ] }\n"
}
