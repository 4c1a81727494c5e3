package schemas

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestSchemasStrict enforces, without node, the rules Ajv's strict mode
// (new Ajv2020({strict: true}): strictSchema, strictTypes, strictTuples,
// strictRequired) applies to the event schemas, so that consumers using Ajv
// can compile them as they are. Checked with the real Ajv 8 and ajv-formats
// when the rules were written (see docs/reliability.md, "Dashboard and alerts against a real Prometheus"); this test keeps
// them from regressing in CI:
//
//   - only draft 2020-12 keywords (no unknown or misspelt keyword, no
//     draft-07 leftovers such as "definitions" or "dependencies");
//   - a keyword that applies to one type only sits next to a "type" that
//     includes it (properties, required, ... need "object"; minLength,
//     pattern, format need "string"; ...);
//   - a "type" list holds at most one type besides "null" (no union types);
//   - every name in "required" is declared in "properties" next to it;
//   - prefixItems come with minItems and items: false or maxItems;
//   - then/else only with if; formats only those ajv-formats knows.
func TestSchemasStrict(t *testing.T) {
	names, err := SchemaFiles()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := Files.ReadFile(path.Join("events", n))
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		for _, p := range strictProblems(doc, "#", nil) {
			t.Errorf("%s: %s", n, p)
		}
	}
}

// TestStrictProblems pins the checker on schemas Ajv's strict mode refuses
// and accepts (each case run through Ajv 8.20 when written; two are
// stricter than Ajv, marked).
func TestStrictProblems(t *testing.T) {
	for schema, want := range map[string]string{
		`{"properties": {"a": {"type": "string"}}}`:                                     `#: "properties" needs "type": "object"`,
		`{"type": "object", "properties": {"a": {"minLength": 1}}}`:                     `#/properties/a: "minLength" needs "type": "string"`,
		`{"type": "object", "required": ["a"]}`:                                         `#: required "a" is not in "properties"`,
		`{"type": "object", "definitions": {}}`:                                         `#: unknown keyword "definitions"`, // Ajv accepts this draft-07 keyword; we stay on 2020-12's $defs
		`{"type": ["string", "integer"]}`:                                               `#: union type [string integer]`,
		`{"type": "array", "prefixItems": [{"type": "string"}], "items": false}`:        `#: "prefixItems" without "minItems" 1`,
		`{"type": "string", "format": "datetime"}`:                                      `#: unknown format "datetime"`,
		`{"then": {"type": "string"}}`:                                                  `#: "then" without "if"`,
		`{"$defs": {"x": {"type": "object", "items": {}}}}`:                             `#/$defs/x: "items" needs "type": "array"`, // Ajv refuses it once referenced
		`{"anyOf": [{"type": "integer", "pattern": "x"}]}`:                              `#/anyOf/0: "pattern" needs "type": "string"`,
		`{"type": "object", "anyOf": [{"required": ["a"], "properties": {"a": true}}]}`: ``, // the type of the parent applies
		`{"type": "object", "propertyNames": {"pattern": "^a"}}`:                        ``, // property names are strings
		`{"type": ["number", "null"], "minimum": 1, "description": "ok"}`:               ``,
		`{"type": "object", "additionalProperties": {"$ref": "#/$defs/x"}}`:             ``,
		`{"type": "object", "properties": {"a": {"type": "integer", "min": 1}}}`:        `#/properties/a: unknown keyword "min"`,
	} {
		var doc any
		if err := json.Unmarshal([]byte(schema), &doc); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(strictProblems(doc, "#", nil), "; ")
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", schema, got, want)
		}
	}
}

// Keywords of draft 2020-12 (core, applicator, unevaluated, validation,
// meta-data, format, content), by where their subschemas are.
var (
	kwSchema    = []string{"not", "if", "then", "else", "items", "contains", "additionalProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	kwSchemaMap = []string{"$defs", "properties", "patternProperties", "dependentSchemas"}
	kwSchemaArr = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	kwOther     = []string{"$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment",
		"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
		"maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains", "minContains",
		"maxProperties", "minProperties", "required", "dependentRequired",
		"title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
		"format", "contentEncoding", "contentMediaType"}
)

// The type a type-specific keyword applies to ("number" covers "integer").
var keywordType = map[string]string{
	"properties": "object", "patternProperties": "object", "additionalProperties": "object", "propertyNames": "object",
	"required": "object", "minProperties": "object", "maxProperties": "object", "dependentRequired": "object",
	"dependentSchemas": "object", "unevaluatedProperties": "object",
	"items": "array", "prefixItems": "array", "contains": "array", "minItems": "array", "maxItems": "array",
	"uniqueItems": "array", "minContains": "array", "maxContains": "array", "unevaluatedItems": "array",
	"minLength": "string", "maxLength": "string", "pattern": "string", "format": "string",
	"contentEncoding": "string", "contentMediaType": "string", "contentSchema": "string",
	"minimum": "number", "maximum": "number", "exclusiveMinimum": "number", "exclusiveMaximum": "number", "multipleOf": "number",
}

// The formats ajv-formats defines.
var ajvFormats = []string{"date", "time", "date-time", "iso-time", "iso-date-time", "duration", "uri", "uri-reference",
	"uri-template", "url", "email", "hostname", "ipv4", "ipv6", "regex", "uuid", "json-pointer",
	"relative-json-pointer", "byte", "int32", "int64", "float", "double", "password", "binary"}

// strictProblems lists what Ajv's strict mode would refuse in the schema at
// where, and in its subschemas. inherited is the type the data is known to
// have without a "type" here: the parent's for allOf, anyOf, oneOf, not,
// if, then and else (as Ajv does), string for propertyNames.
func strictProblems(v any, where string, inherited []string) []string {
	s, ok := v.(map[string]any)
	if !ok {
		if _, isBool := v.(bool); isBool {
			return nil
		}
		return []string{fmt.Sprintf("%s: not a schema (%T)", where, v)}
	}
	var out []string
	bad := func(format string, a ...any) { out = append(out, where+": "+fmt.Sprintf(format, a...)) }
	types := schemaTypes(s["type"])
	if types == nil {
		types = inherited
	}
	nonNull := slices.DeleteFunc(slices.Clone(types), func(t string) bool { return t == "null" })
	if len(nonNull) > 1 {
		bad("union type %v", types)
	}
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(kwSchema, k) && !slices.Contains(kwSchemaMap, k) && !slices.Contains(kwSchemaArr, k) && !slices.Contains(kwOther, k) {
			bad("unknown keyword %q", k)
			continue
		}
		if want, ok := keywordType[k]; ok && !hasType(types, want) {
			bad("%q needs \"type\": %q", k, want)
		}
	}
	if (s["then"] != nil || s["else"] != nil) && s["if"] == nil {
		for _, k := range []string{"then", "else"} {
			if s[k] != nil {
				bad("%q without \"if\"", k)
			}
		}
	}
	if f, ok := s["format"].(string); ok && !slices.Contains(ajvFormats, f) {
		bad("unknown format %q", f)
	}
	if req, ok := s["required"].([]any); ok {
		props, _ := s["properties"].(map[string]any)
		for _, r := range req {
			if name, _ := r.(string); props[name] == nil {
				bad("required %q is not in \"properties\"", name)
			}
		}
	}
	if pre, ok := s["prefixItems"].([]any); ok {
		if mi, _ := s["minItems"].(float64); int(mi) != len(pre) {
			bad("\"prefixItems\" without \"minItems\" %d", len(pre))
		}
		if s["items"] != false && s["maxItems"] == nil {
			bad("\"prefixItems\" without \"items\": false or \"maxItems\"")
		}
	}
	for _, k := range keys {
		switch {
		case k == "propertyNames":
			out = append(out, strictProblems(s[k], where+"/"+k, []string{"string"})...)
		case slices.Contains([]string{"not", "if", "then", "else"}, k):
			out = append(out, strictProblems(s[k], where+"/"+k, types)...)
		case slices.Contains(kwSchema, k):
			out = append(out, strictProblems(s[k], where+"/"+k, nil)...)
		case slices.Contains(kwSchemaMap, k):
			m, ok := s[k].(map[string]any)
			if !ok {
				bad("%q is not an object", k)
				continue
			}
			names := make([]string, 0, len(m))
			for n := range m {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				out = append(out, strictProblems(m[n], where+"/"+k+"/"+n, nil)...)
			}
		case slices.Contains(kwSchemaArr, k):
			a, ok := s[k].([]any)
			if !ok {
				bad("%q is not an array", k)
				continue
			}
			inherit := types // allOf, anyOf, oneOf
			if k == "prefixItems" {
				inherit = nil
			}
			for i, e := range a {
				out = append(out, strictProblems(e, fmt.Sprintf("%s/%s/%d", where, k, i), inherit)...)
			}
		}
	}
	return out
}

// schemaTypes returns the "type" keyword as a list (nil when absent).
func schemaTypes(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// hasType: types includes want ("number" is satisfied by "integer" too).
func hasType(types []string, want string) bool {
	return slices.Contains(types, want) || (want == "number" && slices.Contains(types, "integer"))
}

// TestAsyncAPIPayloadFormat: every message payload of asyncapi.yaml states
// the dialect the event schemas are written in (draft 2020-12): under the
// draft-07 format AsyncAPI names, $ref would replace its siblings and
// order.created.json would accept any event type (README.md).
func TestAsyncAPIPayloadFormat(t *testing.T) {
	b, err := Files.ReadFile("asyncapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Messages map[string]struct {
				Payload struct {
					SchemaFormat string         `json:"schemaFormat"`
					Schema       map[string]any `json:"schema"`
				} `json:"payload"`
			} `json:"messages"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Components.Messages) != len(Types) {
		t.Fatalf("%d messages, want one per event type (%d)", len(doc.Components.Messages), len(Types))
	}
	for name, m := range doc.Components.Messages {
		if f := m.Payload.SchemaFormat; f != "application/schema+json;version=draft-2020-12" {
			t.Errorf("message %s: schemaFormat %q, want application/schema+json;version=draft-2020-12", name, f)
		}
		if m.Payload.Schema["$ref"] == nil {
			t.Errorf("message %s: payload schema is not a $ref to events/", name)
		}
	}
}
