// Package loomotel traces loom with OpenTelemetry, following the GenAI
// semantic conventions of semconv v1.41.0 (the attribute names and values
// are the constants of go.opentelemetry.io/otel/semconv/v1.41.0).
//
// Three pieces, each usable alone:
//
//   - Model is model middleware: a CLIENT span "chat {model}" per Generate
//     and per Stream, with the request's settings, the answer's id, model,
//     finish reason and token usage, and the metrics
//     gen_ai.client.operation.duration and gen_ai.client.token.usage.
//   - Tool is tool middleware: an INTERNAL span "execute_tool {name}" per
//     call, an error when the result is.
//   - Run and Stream wrap one run of an agent in an INTERNAL span
//     "invoke_agent {name}" with the run's id, turns and token totals.
//     The agent passes the span's context down, so the model and tool
//     spans of the run are its children. Resume and ResumeStream do the
//     same for a run the agent continues, with loom.run.resumed, and
//     StartRemoteRun makes a CLIENT span for a run another process
//     drives (on Temporal).
//
// Instrument adds the first two to an agent.Config:
//
//	a := agent.New(loomotel.Instrument(agent.Config{Model: m, Tools: tools},
//		loomotel.WithProvider("openai")))
//	res, err := loomotel.Run(ctx, a, agent.Prompt("Fix the failing test"),
//		loomotel.WithProvider("openai"), loomotel.WithAgentName("coder"))
//
// Spans go to the global TracerProvider and metrics to the global
// MeterProvider unless WithTracerProvider and WithMeterProvider say
// otherwise. WithProvider names the provider (gen_ai.provider.name), which
// nothing in a request says.
//
// # Content
//
// Prompts, answers, tool arguments and tool results are never recorded
// unless WithContentCapture(true) asks for them: they may hold personal or
// secret data, and they are large. Errors are recorded with their messages
// (a provider's error message, a tool's Go error), as OpenTelemetry does.
//
// # error.type
//
// A failed span has status Error and error.type set to: the model.Kind of
// the failure ("auth", "rate_limited", "timeout", "truncated_stream", ...);
// "canceled" when the context was cancelled ("timeout" when its deadline
// passed); "tool_error" for a tool result with IsError set; "panic" for a
// panic; otherwise the Go type of the error, as semconv.ErrorType spells it
// (for example "*agent.BudgetError").
//
// What loom adds under its own names: loom.tool.effect,
// loom.tool.idempotency_key, loom.run.id, loom.run.turns,
// loom.run.resumed, loom.run.suspended and loom.stream.abandoned.
package loomotel
