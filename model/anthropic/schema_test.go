package anthropic_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/loomtest"
	"github.com/loomkit/loom/model"
	"github.com/loomkit/loom/model/anthropic"
)

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"celsius":{"type":"number"}},"required":["city","celsius"],"additionalProperties":false}`

func schemaRequest(schema string) llm.Request {
	return llm.Request{
		System:   "Answer with the weather.",
		Messages: []llm.Message{llm.UserText("Weather in Oslo?")},
		Schema:   &llm.OutputShape{Name: "weather", Schema: json.RawMessage(schema)},
	}
}

// Request.Schema travels as output_config.format of type json_schema, the
// schema as given (white space around it dropped), blocking and
// streaming; the local server, which refuses a malformed format as the
// API does, reads the same schema back. The recorded body pins the shape.
func TestOutputSchemaIsSent(t *testing.T) {
	srv := start(t, loomtest.Text(`{"city":"Oslo","celsius":4}`))
	m := newModel(srv, anthropic.Config{})
	req := schemaRequest(" \n" + weatherSchema + "\n")
	var bodies [][]byte
	both(t, m, req, func(mode string, resp llm.Response, err error) {
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if resp.Message.Text() != `{"city":"Oslo","celsius":4}` {
			t.Fatalf("%s: answer %q", mode, resp.Message.Text())
		}
		r := srv.LastRequest()
		if r.Err != nil {
			t.Fatalf("%s: refused as the API would: %v", mode, r.Err)
		}
		if s := r.Decoded.Schema; s == nil || string(s.Schema) != weatherSchema {
			t.Fatalf("%s: the server read the schema back as %+v", mode, s)
		}
		format := body(t, srv)["output_config"].(map[string]any)["format"].(map[string]any)
		if format["type"] != "json_schema" || len(format) != 2 {
			t.Fatalf("%s: output_config.format = %v", mode, format)
		}
		bodies = append(bodies, r.Body)
	})
	checkGolden(t, "output_schema.json", bodies[0])
	if !bytes.Equal(bodies[0], bytes.Replace(bodies[1], []byte(`,"stream":true`), nil, 1)) {
		t.Errorf("blocking and streaming bodies differ beyond the stream flag:\n%s\n%s", bodies[0], bodies[1])
	}
}

// Config.NoStructuredOutput leaves the schema out: the body is the one of
// the same request without a schema.
func TestOutputSchemaCanBeTurnedOff(t *testing.T) {
	srv := start(t, loomtest.Text(`{"city":"Oslo","celsius":4}`))
	m := newModel(srv, anthropic.Config{NoStructuredOutput: true})
	req := schemaRequest(weatherSchema)
	var bodies [][]byte
	both(t, m, req, func(mode string, _ llm.Response, err error) {
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		r := srv.LastRequest()
		if _, ok := body(t, srv)["output_config"]; ok || r.Decoded.Schema != nil {
			t.Fatalf("%s: the schema was sent: %s", mode, r.Body)
		}
		bodies = append(bodies, r.Body)
	})
	plain := req
	plain.Schema = nil
	if _, err := m.Generate(t.Context(), plain); err != nil {
		t.Fatal(err)
	}
	if want := srv.LastRequest().Body; !bytes.Equal(bodies[0], want) {
		t.Errorf("with the schema turned off the body differs from one without a schema:\n%s\n%s", bodies[0], want)
	}
}

// A schema that is not one JSON object is refused before anything is
// sent, with a non-retryable bad request naming the schema; turned off,
// the same schema is left out and the request goes.
func TestMalformedOutputSchemaIsRefusedBeforeSending(t *testing.T) {
	cases := map[string]string{
		"empty":          "",
		"white space":    " \n\t",
		"null":           "null",
		"cut":            `{"type":"object"`,
		"a string":       `"{\"type\":\"object\"}"`,
		"an array":       `[{"type":"object"}]`,
		"trailing bytes": `{"type":"object"} {}`,
		"not JSON":       `{type: object}`,
	}
	srv := start(t, loomtest.Text("never"))
	m := newModel(srv, anthropic.Config{})
	for name, schema := range cases {
		both(t, m, schemaRequest(schema), func(mode string, _ llm.Response, err error) {
			var me *model.Error
			if !errors.As(err, &me) || me.Kind != model.KindBadRequest || me.Retryable() {
				t.Fatalf("%s/%s: err = %v, want a non-retryable bad request", name, mode, err)
			}
			if msg := err.Error(); !strings.Contains(msg, `output schema (Request.Schema "weather") is not a JSON object`) || !strings.Contains(msg, "not sent") {
				t.Errorf("%s/%s: the message does not say what was wrong and that nothing was sent: %v", name, mode, err)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d refused requests reached the server", n)
	}
	off := newModel(srv, anthropic.Config{NoStructuredOutput: true})
	if _, err := off.Generate(t.Context(), schemaRequest("[1,")); err != nil {
		t.Fatalf("with structured output off the schema is not sent, so not checked: %v", err)
	}
}

// The schema sent is rewritten into the subset the API takes (bounds told
// in the description, objects closed); one whose meaning does not fit
// there (here a map) is left out rather than changed into another.
func TestOutputSchemaIsFittedToTheSubset(t *testing.T) {
	srv := start(t, loomtest.Text(`{"age":3}`), loomtest.Text(`{"m":{"a":1}}`))
	m := newModel(srv, anthropic.Config{})
	if _, err := m.Generate(t.Context(), schemaRequest(`{"type":"object","properties":{"age":{"type":"integer","minimum":0}},"required":["age"]}`)); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"object","properties":{"age":{"type":"integer","description":"(minimum: 0)"}},"required":["age"],"additionalProperties":false}`
	if s := srv.LastRequest().Decoded.Schema; s == nil || string(s.Schema) != want {
		t.Fatalf("the server read the schema as %+v, want %s", s, want)
	}
	if _, err := m.Generate(t.Context(), schemaRequest(`{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"integer"}}}}`)); err != nil {
		t.Fatal(err)
	}
	if _, ok := body(t, srv)["output_config"]; ok || srv.LastRequest().Decoded.Schema != nil {
		t.Fatalf("a map's schema was sent: %s", srv.LastRequest().Body)
	}
}
