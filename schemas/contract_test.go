package schemas

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// deliveryContract is the delivery guarantee as every document states it,
// word for word (white space aside): README.md, docs/how-it-works.md,
// docs/consuming.md, schemas/README.md and the description of
// asyncapi.yaml. Change it here and in all of them at once.
const deliveryContract = "In JetStream mode (`WATCHER_STREAM` set, the default) every change is stored in the stream " +
	"exactly once, in order per order, however long NATS is down or the watcher is stopped, " +
	"also past the stream's duplicate window, provided that (1) the stream still holds the event " +
	"when the watcher would send it again (its `max_age`, `max_bytes` and `max_msgs` did not remove it meanwhile), " +
	"(2) only orderwatch, one active watcher per shop, publishes to its subjects, and " +
	"(3) the state file survives (it holds the outbox). " +
	"When a condition is broken, a change can be stored twice. " +
	coreNATSContract + " " +
	"Either way a consumer must handle an event twice without harm (idempotently, keyed by the event `id`): " +
	"JetStream delivers to a consumer at least once (a message not acknowledged within the ack wait is delivered again) " +
	"and a replay delivers events the consumer has seen."

// coreNATSContract is what core NATS mode (no stream) gives a subscriber,
// as the publisher does it (publisher/core.go: a batch whose flush fails
// goes out again).
const coreNATSContract = "Core NATS mode (`WATCHER_STREAM=\"\"`) keeps nothing: a subscriber that is not connected misses the event, " +
	"and a connected one can receive an event twice (same `id`) when a flush fails after part of a batch arrived."

// idContract is what the event id promises a consumer, with the two cases
// docs/how-it-works.md names ("Event ids", "Hot standby").
const idContract = "Every copy of a change carries the same event `id` and two changes of an order carry different ids, " +
	"except in two rare cases: an order observed in more than three states within one second of the shop's clock can repeat an id, " +
	"and after a hot-standby takeover a demoted active's very late publish can store a change a second time under another id."

// contractDocs are the documents that state the contract.
var contractDocs = []string{"../README.md", "../docs/how-it-works.md", "../docs/consuming.md", "README.md"}

// contradictions are what the documents said before the contract was one
// (issues 25 and 35).
var contradictions = []string{
	"may be stored twice (consumers", "as long as an outage or crash recovery is shorter than that window",
	"is at most once", "at-most-once", "may see an event twice", "never share an id in practice", "Nats-Msg-Id = event id",
	"`Nats-Msg-Id` = the event id", "also the Nats-Msg-Id header", "is deterministic and sent as `Nats-Msg-Id`",
}

var space = regexp.MustCompile(`\s+`)

func normalize(s string) string { return space.ReplaceAllString(s, " ") }

// TestDeliveryContractIsOneStatement: the documents that state the
// delivery guarantee, what core NATS gives and what the event id promises
// state the same (issue 25: they disagreed about re-sends past the
// duplicate window; issue 35: about core NATS and the id), and none says
// what they used to.
func TestDeliveryContractIsOneStatement(t *testing.T) {
	texts := map[string]string{}
	for _, f := range contractDocs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Markdown line breaks and blockquote markers are not part of the text.
		texts[f] = strings.ReplaceAll(string(b), "\n> ", "\n")
	}
	b, err := Files.ReadFile("asyncapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Info struct {
			Description string `json:"description"`
		} `json:"info"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	texts["asyncapi.yaml's description"] = doc.Info.Description
	for name, text := range texts {
		for _, want := range []string{deliveryContract, idContract} {
			if !strings.Contains(normalize(text), normalize(want)) {
				t.Errorf("%s does not state word for word:\n%s", name, want)
			}
		}
	}
	for _, f := range append(contractDocs, "asyncapi.yaml") {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, old := range contradictions {
			if strings.Contains(normalize(string(b)), old) {
				t.Errorf("%s still says %q", f, old)
			}
		}
	}
}
