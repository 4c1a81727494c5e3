package events_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orderwatch/orderwatch/events"
)

// jetstreamNames are the names of the jetstream API a consumer's author
// reads in docs/consuming.md; the compiler checks that they exist.
var jetstreamNames = map[string]any{
	"DeliverPolicy":                jetstream.ConsumerConfig{}.DeliverPolicy,
	"DeliverAllPolicy":             jetstream.DeliverAllPolicy,
	"DeliverNewPolicy":             jetstream.DeliverNewPolicy,
	"DeliverLastPolicy":            jetstream.DeliverLastPolicy,
	"DeliverLastPerSubjectPolicy":  jetstream.DeliverLastPerSubjectPolicy,
	"DeliverByStartTimePolicy":     jetstream.DeliverByStartTimePolicy,
	"DeliverByStartSequencePolicy": jetstream.DeliverByStartSequencePolicy,
	"OptStartTime":                 jetstream.ConsumerConfig{}.OptStartTime,
	"OptStartSeq":                  jetstream.ConsumerConfig{}.OptStartSeq,
	"OrderedConsumer":              jetstream.Stream.OrderedConsumer,
	"FilterSubjects":               jetstream.ConsumerConfig{}.FilterSubjects,
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestConsumingDocNamesTheJetStreamAPI: every deliver policy and start
// option docs/consuming.md names is a name of the jetstream package that
// events.FromMsg takes messages from, and the doc does not claim that
// `go doc` shows the runnable examples (it lists the package; the
// examples show on its documentation page and run with go test).
func TestConsumingDocNamesTheJetStreamAPI(t *testing.T) {
	doc := readDoc(t, "../docs/consuming.md")
	names := regexp.MustCompile("`(?:jetstream\\.)?((?:Deliver|Opt)[A-Za-z]*)`").FindAllStringSubmatch(doc, -1)
	if len(names) < 5 {
		t.Fatalf("docs/consuming.md names %d deliver policies and options, want where a consumer starts", len(names))
	}
	for _, n := range names {
		if _, ok := jetstreamNames[n[1]]; !ok {
			t.Errorf("docs/consuming.md names %s, which is not in the jetstream API (jetstream.DeliverNewPolicy, ...)", n[0])
		}
	}
	if strings.Contains(doc, "(`go doc` shows runnable examples)") {
		t.Error("docs/consuming.md says `go doc` shows the runnable examples")
	}
}

// TestDocFleetFiltersMatch: in fleet mode the subjects carry the shop
// (the prefix is {prefix}.{shop}); every filter README.md and
// docs/consuming.md give for it matches the subject of a shop's event,
// and the plain filters they give for a single shop match nothing there.
func TestDocFleetFiltersMatch(t *testing.T) {
	into8 := statusChange(t, "5", "8")
	fleet := events.Prefix("orders.berlin").Of(into8) // orders.berlin.status_changed.5.8.2302
	single := events.DefaultPrefix.Of(into8)
	fleetFilter := regexp.MustCompile("`(orders\\.(?:berlin|\\*)\\.status_changed\\.[^`]*)`")
	for _, f := range []string{"../README.md", "../docs/consuming.md"} {
		doc := readDoc(t, f)
		found := fleetFilter.FindAllStringSubmatch(doc, -1)
		if len(found) < 2 {
			t.Errorf("%s gives %d status filters for fleet mode (orders.<shop>.status_changed...), want one shop's and every shop's", f, len(found))
		}
		for _, m := range found {
			if !strings.ContainsAny(m[1], "*>") { // a subject: one of a shop's
				if _, err := events.Prefix("orders.berlin").Parse(m[1]); err != nil {
					t.Errorf("%s: %v", f, err)
				}
				continue
			}
			if !subjectMatches(m[1], fleet) {
				t.Errorf("%s: fleet filter %s does not match %s", f, m[1], fleet)
			}
		}
		if !strings.Contains(doc, "`orders.status_changed.*.8.") {
			continue
		}
		if subjectMatches("orders.status_changed.*.8.>", fleet) || !subjectMatches("orders.status_changed.*.8.>", single) {
			t.Errorf("the single-shop filter matches fleet subjects: the test's matcher is wrong")
		}
	}
	if p := events.Prefix("orders.*"); !subjectMatches(p.Into("8"), fleet) || !subjectMatches(p.All(), fleet) {
		t.Errorf("Prefix(\"orders.*\") filters %s, %s do not match %s", p.Into("8"), p.All(), fleet)
	}
}

// subjectMatches is NATS subject matching: '*' one token, '>' the rest.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}

func statusChange(t *testing.T, from, to string) events.Event {
	t.Helper()
	prev, _ := sweepEvents(t, nil, entryJSON(from, "unlocked", "2026-11-22T09:58:02+01:00"))
	_, evs := sweepEvents(t, &prev, entryJSON(to, "unlocked", "2026-11-22T10:02:41+01:00"))
	if len(evs) != 1 || evs[0].Type != events.StatusChanged {
		t.Fatalf("a status change %s -> %s published %v", from, to, evs)
	}
	return evs[0]
}
