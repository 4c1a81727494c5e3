package schemas

import (
	"encoding/json"
	"testing"
)

// TestSchemaExamplesValidate: every type's schema has examples, and each is
// an event of that type that passes Validate.
func TestSchemaExamplesValidate(t *testing.T) {
	ex, err := Examples()
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range Types {
		if len(ex[typ]) == 0 {
			t.Errorf("the schema of %s has no examples", typ)
		}
		for i, e := range ex[typ] {
			var head struct {
				Type string `json:"type"`
			}
			if err := json.Unmarshal(e, &head); err != nil || head.Type != typ {
				t.Errorf("%s example %d: type %q (%v)", typ, i, head.Type, err)
			}
			if err := Validate(e); err != nil {
				t.Errorf("%s example %d: %v", typ, i, err)
			}
		}
	}
}
