package shops

import (
	"strings"
	"testing"
)

// TestParseRefusesTrailingContent: a registry followed by more content
// (two documents concatenated after a bad merge) is not a registry: the
// second part would be dropped without a word.
func TestParseRefusesTrailingContent(t *testing.T) {
	one := `{"shops":[{"id":"a","url":"http://a.example","username":"u","passwordEnv":"PW"}]}`
	two := `{"shops":[{"id":"b","url":"http://b.example","username":"u","passwordEnv":"PW"}]}`
	for _, data := range []string{one + "\n" + two, one + "\n]", one + " x", one + "{"} {
		valid, _, err := Parse([]byte(data), nil, env(map[string]string{"PW": "x"}))
		if err == nil || !strings.Contains(err.Error(), "after the registry") {
			t.Errorf("%q: err %v (valid %d), want an error about the content after the registry", data, err, len(valid))
		}
	}
	if _, _, err := Parse([]byte(one+"\n\n  \t\n"), nil, nil); err != nil {
		t.Errorf("white space after the registry: %v", err)
	}
}
