package plentysim

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestCorruptEntry(t *testing.T) {
	h := newHarness(t, Config{Seed: 5})
	h.sim.Generate(5, h.clock.Now().Add(-time.Hour), h.clock.Now().Add(-time.Minute))
	orders := h.sim.Orders()
	victim, other := orders[1], orders[3]
	tok := h.login()
	ids := fmt.Sprintf("orderId=in:%d,%d&sortOrder=asc", victim.ID, other.ID)

	if err := h.sim.Corrupt(victim.ID, CorruptStatus); err != nil {
		t.Fatal(err)
	}
	env := h.search(tok, ids, nil)
	if env.TotalsCount != 2 || len(env.Entries) != 2 || !slices.Equal(env.ids(t), []int64{victim.ID, other.ID}) {
		t.Fatalf("by id: %+v", env)
	}
	var status map[string]any
	if err := json.Unmarshal(env.Entries[0]["statusId"], &status); err != nil {
		t.Errorf("corrupt statusId %s: want an object", env.Entries[0]["statusId"])
	}
	if string(env.Entries[1]["statusId"]) != other.StatusID {
		t.Errorf("the other order's statusId is %s, want %s", env.Entries[1]["statusId"], other.StatusID)
	}

	if err := h.sim.Corrupt(victim.ID, CorruptID); err != nil {
		t.Fatal(err)
	}
	env = h.search(tok, ids, nil)
	if want := fmt.Sprintf(`"broken-%d"`, victim.ID); string(env.Entries[0]["id"]) != want {
		t.Errorf("corrupt id %s, want %s", env.Entries[0]["id"], want)
	}

	// Readable again, and the order itself never changed.
	if err := h.sim.Corrupt(victim.ID, CorruptNone); err != nil {
		t.Fatal(err)
	}
	env = h.search(tok, ids, nil)
	if !slices.Equal(env.ids(t), []int64{victim.ID, other.ID}) || string(env.Entries[0]["statusId"]) != victim.StatusID {
		t.Errorf("after the corruption ended: %+v", env)
	}
	if now, _ := h.sim.Order(victim.ID); !now.UpdatedAt.Equal(victim.UpdatedAt) || len(h.sim.History()) != 0 {
		t.Errorf("the corruption changed the order: updatedAt %v -> %v, %d changes", victim.UpdatedAt, now.UpdatedAt, len(h.sim.History()))
	}
	if err := h.sim.Corrupt(999999, CorruptStatus); err == nil {
		t.Error("an unknown order was accepted")
	}
	if err := h.sim.Corrupt(victim.ID, "sideways"); err == nil {
		t.Error("an unknown corruption was accepted")
	}
}
