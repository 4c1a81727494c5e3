package pipeline

import "testing"

// TestConfigScope: WATCHER_SCOPE's filters and WATCHER_SCOPE_JSON's group
// are parsed with their values (a decimal among ids included).
func TestConfigScope(t *testing.T) {
	c := &Config{
		Scope:     "orderTypeId=1&statusId=in:5,6.1",
		ScopeJSON: `{"conditionType":"or","fields":[{"field":"referrerId","operator":"in","value":[1,4.01]}]}`,
	}
	if _, err := c.ScopeSplit(); err != nil {
		t.Fatal(err)
	}
	fs, _ := c.scopeFilters()
	g, _ := c.scopeGroup()
	if len(fs) != 2 || g == nil || !g.Or || len(g.Fields) != 1 || len(g.Fields[0].Values) != 2 {
		t.Errorf("scope %v group %+v", fs, g)
	}
}
