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
	"Core NATS mode (`WATCHER_STREAM=\"\"`) is at most once: a subscriber that is not connected misses the event. " +
	"Either way a consumer must handle an event twice without harm (idempotently, keyed by the event `id`): " +
	"JetStream delivers to a consumer at least once (a message not acknowledged within the ack wait is delivered again) " +
	"and a replay delivers events the consumer has seen."

var space = regexp.MustCompile(`\s+`)

func normalize(s string) string { return space.ReplaceAllString(s, " ") }

// TestDeliveryContractIsOneStatement: the documents that state the
// delivery guarantee state the same one (issue 25: they used to disagree
// about re-sends past the duplicate window).
func TestDeliveryContractIsOneStatement(t *testing.T) {
	want := normalize(deliveryContract)
	for _, f := range []string{"../README.md", "../docs/how-it-works.md", "../docs/consuming.md", "README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Markdown line breaks and blockquote markers are not part of the text.
		text := normalize(strings.ReplaceAll(string(b), "\n> ", "\n"))
		if !strings.Contains(text, want) {
			t.Errorf("%s does not state the delivery contract word for word:\n%s", f, deliveryContract)
		}
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
	if !strings.Contains(normalize(doc.Info.Description), want) {
		t.Errorf("asyncapi.yaml's description does not state the delivery contract word for word")
	}
	// The contradiction this replaced.
	for _, old := range []string{"may be stored twice (consumers", "as long as an outage or crash recovery is shorter than that window"} {
		if strings.Contains(doc.Info.Description, old) {
			t.Errorf("asyncapi.yaml still says %q", old)
		}
	}
}
