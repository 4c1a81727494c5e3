package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"text/template"
)

// TestDocDwellRuleIsOne: the example "stuck in a status" rule is one text
// in docs/consuming.md and docs/operations.md, and it makes one alert per
// shop: it keeps the shop label of a fleet (max by shop) and merges the
// replicas of a hot-standby group (max over the rest). Its annotations are
// valid templates.
func TestDocDwellRuleIsOne(t *testing.T) {
	block := regexp.MustCompile("(?s)```yaml\n- alert: OrdersStuckInStatus5\n.*?```")
	var rules []string
	for _, f := range []string{"../../docs/consuming.md", "../../docs/operations.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		found := block.FindAllString(string(b), -1)
		if len(found) != 1 {
			t.Fatalf("%s has %d example dwell rules, want 1", f, len(found))
		}
		rules = append(rules, found[0])
	}
	if rules[0] != rules[1] {
		t.Errorf("the example dwell rule differs:\nconsuming.md:\n%s\noperations.md:\n%s", rules[0], rules[1])
	}
	expr := regexp.MustCompile(`(?m)^  expr: (.*)$`).FindStringSubmatch(rules[0])
	if expr == nil || !regexp.MustCompile(`^max by \(job, namespace, shop\) \(orderwatch_status_oldest_age_seconds\{status="5"\}\) > `).MatchString(expr[1]) {
		t.Errorf("the rule's expr %q does not make one alert per shop (max by (job, namespace, shop))", expr)
	}
	for _, a := range regexp.MustCompile(`(?m)^    (?:summary|description): "(.*)"$`).FindAllStringSubmatch(rules[0], -1) {
		tmpl, err := template.New("a").Funcs(template.FuncMap{"humanizeDuration": func(any) string { return "2d" }}).Parse("{{ $labels := .Labels }}{{ $value := .Value }}" + a[1])
		if err != nil {
			t.Errorf("annotation %q: %v", a[1], err)
			continue
		}
		for _, shop := range []string{"", "berlin"} {
			var out strings.Builder
			if err := tmpl.Execute(&out, map[string]any{"Labels": map[string]string{"shop": shop}, "Value": 1.0}); err != nil {
				t.Errorf("annotation %q: %v", a[1], err)
			}
			if shop == "" && strings.Contains(out.String(), "shop") || shop != "" && !strings.Contains(out.String(), "berlin") && strings.Contains(a[1], "shop") {
				t.Errorf("annotation %q with shop %q: %s", a[1], shop, out.String())
			}
		}
	}
}
