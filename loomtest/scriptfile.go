package loomtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/loomkit/loom/llm"
)

// ReadScript reads a script file: a JSON object that configures a server.
// Unknown fields are refused.
//
//	{
//	  "repeat": true,
//	  "api_key": "sk-test",
//	  "turns": [
//	    {"tool_calls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "a.go"}}]},
//	    {"status": 429, "headers": {"retry-after": "2"}},
//	    {"text": "done", "usage": {"input_tokens": 12, "output_tokens": 3}}
//	  ],
//	  "openai": [...], "anthropic": [...]
//	}
//
// A turn holds "text" (one text part), "thinking" and "signature" (one
// thinking part, first), "tool_calls" (arguments as a JSON value, or a
// string sent verbatim, so "{\"a\":" is malformed), or "parts" in llm's
// part JSON; and the fields of Turn in snake case: "usage" (llm.Usage
// JSON), "finish", "stop_reason", "id", "model", "chunk", "reset",
// "header_delay", "headers", "status", "error" ({"type", "message",
// "code"}), "body", "content_type", "pings", "event_delay", "error_after",
// "cut" ("end", "abort" or "silence"), "cut_after" and "ping_every".
// Durations are Go durations ("1.5s").
func ReadScript(r io.Reader) (Config, error) {
	var file struct {
		Repeat    bool       `json:"repeat"`
		APIKey    string     `json:"api_key"`
		Lenient   bool       `json:"lenient"`
		Turns     []fileTurn `json:"turns"`
		OpenAI    []fileTurn `json:"openai"`
		Anthropic []fileTurn `json:"anthropic"`
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return Config{}, fmt.Errorf("loomtest: read script: %w", err)
	}
	cfg := Config{Repeat: file.Repeat, APIKey: file.APIKey, Lenient: file.Lenient}
	var err error
	if cfg.Turns, err = convertTurns("turns", file.Turns); err != nil {
		return Config{}, err
	}
	if file.OpenAI != nil {
		if cfg.OpenAI, err = convertTurns("openai", file.OpenAI); err != nil {
			return Config{}, err
		}
	}
	if file.Anthropic != nil {
		if cfg.Anthropic, err = convertTurns("anthropic", file.Anthropic); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

type fileDuration time.Duration

func (d *fileDuration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string like \"1.5s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = fileDuration(v)
	return nil
}

type fileTurn struct {
	Text      *string           `json:"text"`
	Thinking  *string           `json:"thinking"`
	Signature string            `json:"signature"`
	ToolCalls []fileCall        `json:"tool_calls"`
	Parts     []json.RawMessage `json:"parts"`

	Usage       llm.Usage         `json:"usage"`
	Finish      llm.FinishReason  `json:"finish"`
	StopReason  string            `json:"stop_reason"`
	ID          string            `json:"id"`
	Model       string            `json:"model"`
	Chunk       int               `json:"chunk"`
	Reset       bool              `json:"reset"`
	HeaderDelay fileDuration      `json:"header_delay"`
	Headers     map[string]string `json:"headers"`
	Status      int               `json:"status"`
	Error       *APIError         `json:"error"`
	Body        string            `json:"body"`
	ContentType string            `json:"content_type"`
	Pings       int               `json:"pings"`
	EventDelay  fileDuration      `json:"event_delay"`
	ErrorAfter  int               `json:"error_after"`
	Cut         string            `json:"cut"`
	CutAfter    int               `json:"cut_after"`
	PingEvery   fileDuration      `json:"ping_every"`
}

type fileCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func convertTurns(list string, in []fileTurn) ([]Turn, error) {
	out := make([]Turn, 0, len(in))
	for i, ft := range in {
		t, err := ft.turn()
		if err != nil {
			return nil, fmt.Errorf("loomtest: script %s[%d]: %w", list, i, err)
		}
		out = append(out, t)
	}
	return out, nil
}

func (ft fileTurn) turn() (Turn, error) {
	t := Turn{
		Usage: ft.Usage, Finish: ft.Finish, StopReason: ft.StopReason, ID: ft.ID, Model: ft.Model,
		Chunk: ft.Chunk, Reset: ft.Reset, HeaderDelay: time.Duration(ft.HeaderDelay), Status: ft.Status,
		Error: ft.Error, Body: ft.Body, ContentType: ft.ContentType, Pings: ft.Pings,
		EventDelay: time.Duration(ft.EventDelay), ErrorAfter: ft.ErrorAfter, CutAfter: ft.CutAfter,
		PingEvery: time.Duration(ft.PingEvery),
	}
	if ft.Thinking != nil {
		t.Parts = append(t.Parts, llm.Thinking{Text: *ft.Thinking, Signature: ft.Signature})
	}
	if ft.Text != nil {
		t.Parts = append(t.Parts, llm.Text{Text: *ft.Text})
	}
	for _, raw := range ft.Parts {
		p, err := llm.UnmarshalPart(raw)
		if err != nil {
			return Turn{}, fmt.Errorf("parts: %w", err)
		}
		t.Parts = append(t.Parts, p)
	}
	for _, c := range ft.ToolCalls {
		args := string(bytes.TrimSpace(c.Arguments))
		if len(args) > 0 && args[0] == '"' {
			if err := json.Unmarshal(c.Arguments, &args); err != nil {
				return Turn{}, fmt.Errorf("tool_calls: %w", err)
			}
		}
		t.Parts = append(t.Parts, llm.ToolCall{ID: c.ID, Name: c.Name, Arguments: args})
	}
	if len(ft.Headers) > 0 {
		t.Header = http.Header{}
		for k, v := range ft.Headers {
			t.Header.Set(k, v)
		}
	}
	switch ft.Cut {
	case "":
	case "end":
		t.Cut = CutEnd
	case "abort":
		t.Cut = CutAbort
	case "silence":
		t.Cut = CutSilence
	default:
		return Turn{}, fmt.Errorf("cut %q: want \"end\", \"abort\" or \"silence\"", ft.Cut)
	}
	return t, nil
}
