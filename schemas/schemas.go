// Package schemas holds the contract of orderwatch's events: a JSON Schema
// (draft 2020-12) per event type in events/, their shared definitions in
// events/defs.json, and the AsyncAPI 3.0 document asyncapi.yaml (written in
// JSON syntax, which is YAML too) that maps the NATS subjects to them.
//
// Validate checks an encoded event against the schema of its type; tests of
// any package (and the end-to-end tests of the binary) use it to check what
// is actually emitted.
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Files holds events/*.json and asyncapi.yaml.
//
//go:embed events/*.json asyncapi.yaml
var Files embed.FS

// BaseURL is the $id prefix of the event schemas: the schema of type T is
// BaseURL + T + ".json".
const BaseURL = "https://orderwatch.dev/schemas/events/"

// Types lists the event types, one schema each.
var Types = []string{"order.created", "order.status_changed", "order.lock_changed", "order.discovered", "order.updated"}

// compiled is every type's schema, compiled once.
var compiled = sync.OnceValues(compile)

func compile() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat() // date-time, uri-reference are assertions, not annotations
	// Only the embedded files: a $ref to anything else fails to compile.
	c.UseLoader(jsonschema.SchemeURLLoader{})
	entries, err := fs.ReadDir(Files, "events")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := Files.ReadFile(path.Join("events", e.Name()))
		if err != nil {
			return nil, err
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", e.Name(), err)
		}
		if err := c.AddResource(BaseURL+e.Name(), doc); err != nil {
			return nil, fmt.Errorf("schema %s: %w", e.Name(), err)
		}
	}
	out := make(map[string]*jsonschema.Schema, len(Types))
	for _, t := range Types {
		s, err := c.Compile(BaseURL + t + ".json")
		if err != nil {
			return nil, fmt.Errorf("compile schema of %s: %w", t, err)
		}
		out[t] = s
	}
	return out, nil
}

// Validate checks an encoded event (a CloudEvents JSON message) against the
// schema of its "type", and the relations between fields that JSON Schema
// cannot express: subject and data.order.id equal data.orderId, time equals
// data.after.updatedAt.
func Validate(eventJSON []byte) error {
	schemas, err := compiled()
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(eventJSON))
	if err != nil {
		return fmt.Errorf("event is not JSON: %w", err)
	}
	obj, ok := inst.(map[string]any)
	if !ok {
		return errors.New("event is not a JSON object")
	}
	typ, _ := obj["type"].(string)
	s := schemas[typ]
	if s == nil {
		return fmt.Errorf("event type %q is not one of %s", typ, strings.Join(Types, ", "))
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("event of type %s: %w", typ, err)
	}
	return crossCheck(obj)
}

// crossCheck compares fields of an event that passed its schema.
func crossCheck(ev map[string]any) error {
	data := ev["data"].(map[string]any)
	orderID := data["orderId"].(json.Number).String()
	if ev["subject"] != orderID {
		return fmt.Errorf("subject %q differs from data.orderId %s", ev["subject"], orderID)
	}
	switch id := data["order"].(map[string]any)["id"].(type) {
	case json.Number:
		if id.String() != orderID {
			return fmt.Errorf("data.order.id %s differs from data.orderId %s", id, orderID)
		}
	case string:
		if strings.TrimLeft(id, "0") != orderID {
			return fmt.Errorf("data.order.id %q differs from data.orderId %s", id, orderID)
		}
	}
	if updated := data["after"].(map[string]any)["updatedAt"]; ev["time"] != updated {
		return fmt.Errorf("time %q differs from data.after.updatedAt %q", ev["time"], updated)
	}
	return nil
}

// SchemaFiles returns the names of the files in events/, sorted.
func SchemaFiles() ([]string, error) {
	entries, err := fs.ReadDir(Files, "events")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names, nil
}

// Examples returns the "examples" of each event type's schema, as encoded
// events (one or more per type): complete events as orderwatch emits them,
// for documentation and for the tests of consumers.
func Examples() (map[string][]json.RawMessage, error) {
	out := make(map[string][]json.RawMessage, len(Types))
	for _, t := range Types {
		b, err := Files.ReadFile("events/" + t + ".json")
		if err != nil {
			return nil, err
		}
		var doc struct {
			Examples []json.RawMessage `json:"examples"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("schema %s: %w", t, err)
		}
		out[t] = doc.Examples
	}
	return out, nil
}
