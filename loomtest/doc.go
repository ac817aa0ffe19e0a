// Package loomtest is a local HTTP server that speaks the OpenAI Chat
// Completions and Anthropic Messages wire formats, blocking and streaming
// (SSE), the way the vendors document them. It plays a script of turns,
// records every request, and injects faults: error statuses with retry
// headers, HTML pages, connection resets, streams cut cleanly or abruptly,
// error events after HTTP 200, malformed tool-call arguments, delays,
// silences and keep-alive pings.
//
// Tests use it to check model adapters at the HTTP level without a live
// API; benchmarks use it as a fast, predictable peer (every turn is encoded
// once and replayed as bytes; nothing sleeps unless a turn asks).
//
//	srv := loomtest.Start(loomtest.Config{Turns: []loomtest.Turn{
//		loomtest.ToolCalls(loomtest.Call("call_1", "read_file", `{"path":"a.go"}`)),
//		loomtest.Status(529, "overloaded_error", "Overloaded"),
//		loomtest.Text("done"),
//	}})
//	defer srv.Close()
//	// point an Anthropic client at srv.AnthropicURL(), an OpenAI one at srv.OpenAIURL()
//
// Endpoints: POST /v1/chat/completions (OpenAI) and POST /v1/messages
// (Anthropic). Requests are checked like the vendors check them (required
// fields, tool-call pairing, id and tool-name patterns, the system prompt's
// place, where images may go and their formats and sizes, the shape of the
// output schema) and refused with the vendor's 400 when they break a rule,
// without taking a turn; Config.Lenient turns the checks off. Images
// inside an Anthropic tool_result are decoded into the result's Images;
// OpenAI image parts keep their URL (a data: URL as it came). The output
// schema of structured output, Anthropic's output_config.format or
// OpenAI's response_format (of type json_schema both), is decoded into
// Decoded.Schema; Anthropic names no schema, so its Name is empty.
//
// Turns are taken in arrival order from the shared script, or from a
// format's own script, or made per request by Config.Func. The server is
// safe for concurrent use.
package loomtest
