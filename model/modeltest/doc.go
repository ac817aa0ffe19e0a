// Package modeltest helps test code that talks to models.
//
// Script is a scripted model.Model: it plays a fixed list of turns (answers,
// failures, cut streams, delays) and records every request, so drivers and
// tools can be tested without HTTP.
//
// Run is the conformance suite every wire adapter (model/openai,
// model/anthropic) passes against the loomtest server: streaming and
// blocking calls give the same llm.Response, a multi-tool round trip works,
// every injected fault becomes the right model.Kind, a corpus of
// pathological streams (testdata/streams) ends in a typed outcome, and an
// answer past the adapter's bounds (one that never ends, too many calls or
// parts, huge arguments) fails with model.KindAnswerTooLarge, its memory
// measured, while one at the bounds passes.
package modeltest
