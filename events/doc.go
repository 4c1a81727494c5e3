// Package events is the consumer's side of orderwatch's events: typed
// structs for the CloudEvents JSON messages it publishes (they match the
// JSON Schemas in schemas/events field for field), decoding from a NATS
// message, the subjects and wildcard filters a consumer subscribes with,
// and a helper that remembers handled event ids.
//
// A consumer decodes a JetStream message with FromMsg, picks its
// subscriptions with Prefix (Into, OutOf, Transition, Order, ...),
// handles each event id once with Once and a Deduper (Memory in process,
// KV across restarts and instances; concurrent deliveries of one id run
// the handler once) and, where the order of an order's events matters,
// applies an event only when Latest says it is newer than what it holds.
// Package events/consume connects to the events and loops over a
// consumer's messages.
//
// The contract these types describe (subjects, the silent first sync,
// before: null on first sight, the delivery guarantee and what it asks of
// a consumer) is in docs/consuming.md; runnable consumers are in examples/.
//
// The package does not depend on the CloudEvents SDK: the events have one
// fixed shape (structured mode, no extension attributes), which these
// structs decode in one pass; the SDK would add its dependencies and decode
// data in a second step. A consumer that uses the SDK reads the same
// messages (structured mode, Content-Type application/cloudevents+json)
// and can unmarshal event.Data() into Data.
package events
