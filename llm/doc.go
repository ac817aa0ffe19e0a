// Package llm is loom's vocabulary: the messages, parts, tool specs, usage,
// requests, responses and stream events that every other package speaks, and
// the one pure Accumulator that folds a stream of events into a Response.
//
// It holds data and the rules of that data, nothing else: no IO, no context,
// no clock, and only the standard library. Provider adapters translate between
// these types and a vendor's wire format; the run machine (package run) decides
// with them; drivers move them around.
//
// # Ownership
//
// Values of these types are plain data. Slices inside a Message, Request or
// Response are owned by whoever holds the value; a function that keeps one
// says so. Nothing here is safe for concurrent mutation, and everything is
// safe for concurrent reading.
//
// # JSON
//
// Every type encodes to stable JSON (fixed field order, parts tagged by a
// "type" field) and decodes back to an equal value. Persisted documents built
// from these types (run snapshots, checkpoints) carry their own format number;
// this package only guarantees the shape of each value.
package llm
