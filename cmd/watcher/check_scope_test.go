package main

import (
	"strings"
	"testing"

	"github.com/orderwatch/orderwatch/pipeline"
)

// TestCheckSaysHowTheScopeIsSplit: watcher check names what goes to the
// service and what orderwatch evaluates.
func TestCheckSaysHowTheScopeIsSplit(t *testing.T) {
	setBase(t)
	t.Setenv("WATCHER_SCOPE", "orderTypeId=1&statusId=in:5,6")
	t.Setenv("WATCHER_SCOPE_JSON", `{"conditionType":"or","fields":[{"field":"referrerId","operator":"eq","value":1},{"field":"lockStatus","operator":"not","value":"unlocked"}]}`)
	cfg, err := LoadConfig()
	if err != nil {
		t.Fatal(err)
	}
	sp, err := cfg.ScopeSplit()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	pipeline.WriteScope(&out, sp)
	for _, want := range []string{
		"scope sent to the service (fields that never change): orderTypeId=eq:1\n",
		"scope evaluated by orderwatch on before and after (fields that change; an order leaving the scope is published): statusId=in:5,6 and (referrerId=eq:1 or lockStatus=not:unlocked)\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("check output lacks %q:\n%s", want, out.String())
		}
	}
	t.Setenv("WATCHER_SCOPE_JSON", "")
	t.Setenv("WATCHER_SCOPE", "itemId=7")
	if _, err := LoadConfig(); err == nil || !strings.Contains(err.Error(), "WATCHER_SCOPE: scope filter itemId") {
		t.Errorf("itemId in the scope: %v, want a config error naming WATCHER_SCOPE and the filter", err)
	}
}
