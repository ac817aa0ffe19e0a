// Package recorded replays real provider traffic through loom's adapters.
// It holds no code of its own: its tests and testdata are the point.
//
// The corpus under testdata/<provider>/ is HTTP response bodies that other
// public projects recorded from live APIs and servers (OpenAI, Anthropic,
// Azure OpenAI, Groq, xAI, OpenRouter, Mistral, DeepSeek, Qwen on
// DashScope, Z.ai, Hugging Face, Vercel's AI Gateway, Avian, Perplexity,
// Together, Ollama, llama.cpp) and committed as test fixtures: VCR
// cassettes, httprr traces and chunk files. testdata/SOURCES.md names, for
// every body file, the repository, path, commit and licence it comes from.
// Only bodies are kept, byte for byte as the source stores them (a
// cassette's YAML is unpacked into its body bytes, status, content type
// and the few headers loom reads); none of the source projects' code is.
//
// # Layout
//
// Each recording is a body file and an expectation, NAME.expect.json:
//
//	{
//	  "format": "openai" | "anthropic",   which adapter reads it
//	  "call": "generate" | "stream",      how the recorded request was made
//	  "status": 200, "content_type": "text/event-stream",
//	  "headers": {"request-id": "..."},   optional, as recorded
//	  "body": "NAME.sse",                 the body file
//	  "framing": "raw" | "jsonl",
//	  "want": {...}
//	}
//
// Body files are .json (a blocking body), .sse (an event stream as
// recorded), .jsonl (one event payload per line, as the AI SDK records
// them) and .gz (a body recorded with Content-Encoding: gzip, served so).
//
// Framing "raw" serves the file as it is; an event stream is flushed at
// each event boundary, so the client sees the events arrive one by one.
// Framing "jsonl" serves each line as one SSE event and flushes it: for the
// OpenAI format "data: LINE", then a final "data: [DONE]" (what the source's
// own test server does and what the APIs send); for the Anthropic format
// "event: TYPE" and "data: LINE", TYPE being the line's own "type", as
// Anthropic frames its events. The bytes of every event payload are the
// recorded ones.
//
// # Expectations
//
// "want" is written from reading the recording, and from the source
// project's own assertions where it has them, never from what an adapter
// returns:
//
//	"id", "model"      the response's id and model
//	"text"             the answer's text, all text parts joined
//	"thinking"         the thinking parts in order: text, and for Anthropic
//	                   the signature, or the redacted data
//	"calls"            tool calls in order: id, name and arguments exactly
//	                   as sent (empty arguments as {}; Anthropic's blocking
//	                   input, a JSON value rather than text, is compared as
//	                   JSON)
//	"finish"           the finish reason in loom's words
//	"usage"            token counts, null when the response reports none
//	"request_id"       the request id header, where recorded
//	"error"            instead of all the above: the model.Kind, and where
//	                   known the HTTP status, the provider's error type and
//	                   whether a retry may help
//
// Usage is written in one definition for every provider: "input" counts
// every input token, cached or not (Anthropic reports cache reads and
// writes beside input_tokens, so they are added; OpenAI's prompt_tokens
// already holds cached tokens); "output" counts every output token,
// reasoning included (xAI and Gemini count reasoning tokens beside
// completion_tokens, so they are added); "cache_read", "cache_write" and
// "reasoning" are the parts as reported. Total() must equal input plus
// output. A stream's usage is what its last report says, a reported zero
// included. An Anthropic response that compacted its context reports the
// usage of each sampling step in usage.iterations, and its top-level
// counts cover the last step only; its usage is the sum of the iterations
// (as the AI SDK and pydantic-ai, whose recordings these are, assert).
//
// # The tests
//
// TestReplay serves every recording from one loopback httptest server and
// drives the real adapter, model/openai (with a base URL) or
// model/anthropic, blocking or streaming as the recording was made. A
// stream is replayed twice: flushed per event, then in writes of a few
// bytes each, so every event is split across reads. A streamed answer
// must end with its Finish event, or with an error as its last element.
// The server also checks that the adapter asked for what the recording
// answers (stream or not, the right endpoint).
//
// TestCorpus checks the corpus itself: every expectation names a body that
// exists, every file is used, every body has its line in SOURCES.md, and
// the corpus spans at least 60 recordings of at least 10 providers.
//
// # Adding a recording
//
// Take the body from a public project whose licence allows redistribution,
// keep its bytes, add the expectation from reading it, and add its line to
// SOURCES.md. A synthetic or hand-edited body does not belong here; the
// hand-written pathological streams live in model/modeltest.
package recorded
