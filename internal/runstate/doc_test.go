package runstate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
)

var docPath = filepath.Join(docsDir, "run-state.md")

// jsonBlocks returns the contents of the ```json blocks of a Markdown
// document.
func jsonBlocks(doc string) []string {
	var out []string
	var cur *strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```json":
			cur = new(strings.Builder)
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
			cur.WriteByte('\n')
		}
	}
	return out
}

// decodeAll decodes every JSON value of a block (one document, or a
// journal's lines).
func decodeAll(t *testing.T, block string) []json.RawMessage {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(block))
	var out []json.RawMessage
	for {
		var v json.RawMessage
		err := dec.Decode(&v)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("an example is not JSON: %v\n%s", err, block)
		}
		out = append(out, v)
	}
}

func parse(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Every JSON example of docs/run-state.md validates against its schema
// and is a fixture, or a record of one, exactly: examples and fixtures
// cannot drift apart.
func TestDocExamples(t *testing.T) {
	var snapshots, agentSnaps, records []any
	for _, f := range allSnapshots(t) {
		snapshots = append(snapshots, parse(t, read(t, f)))
	}
	for _, f := range files(t, agentFixtures, "*.json", 2) {
		agentSnaps = append(agentSnaps, parse(t, read(t, f)))
	}
	for _, f := range files(t, journalFixtures, "*.jsonl", 10) {
		for _, l := range lines(t, f) {
			records = append(records, parse(t, l))
		}
	}
	in := func(v any, set []any) bool {
		for _, s := range set {
			if reflect.DeepEqual(v, s) {
				return true
			}
		}
		return false
	}
	n := 0
	for _, block := range jsonBlocks(string(read(t, docPath))) {
		for _, raw := range decodeAll(t, block) {
			n++
			v, _ := parse(t, raw).(map[string]any)
			var schema string
			var set []any
			switch {
			case v["seq"] != nil && v["kind"] != nil:
				schema, set = schemaRecord, records
			case v["format"] != nil && v["state"] != nil:
				schema, set = schemaSnapshot, snapshots
			case v["format"] != nil && v["run"] != nil:
				schema, set = schemaAgent, agentSnaps
			default:
				t.Errorf("an example that is no record or snapshot:\n%s", raw)
				continue
			}
			if err := validate(t, schema, raw); err != nil {
				t.Errorf("an example does not validate against %s: %v\n%s", schema, err, raw)
			}
			if !in(v, set) {
				t.Errorf("an example is not a fixture (copy it from one):\n%s", raw)
			}
		}
	}
	if n < 15 {
		t.Fatalf("only %d JSON examples in %s", n, docPath)
	}
}

var space = regexp.MustCompile(`\s+`)

// The texts and messages the document quotes are the ones loom uses.
func TestDocQuotes(t *testing.T) {
	doc := space.ReplaceAllString(string(read(t, docPath)), " ")
	if !strings.Contains(doc, agent.InterruptedMaybe) {
		t.Errorf("the document does not quote agent.InterruptedMaybe: %q", agent.InterruptedMaybe)
	}
	snap := bytes.Replace(read(t, fixture("failed_config")), []byte(`"format": 1`), []byte(`"format": 2`), 1)
	var r run.Run
	errSnap := json.Unmarshal(snap, &r)
	line := lines(t, filepath.Join(journalFixtures, "finished.jsonl"))[1]
	journal := string(lines(t, filepath.Join(journalFixtures, "finished.jsonl"))[0]) + "\n" + strings.Replace(string(line), `"version":1`, `"version":2`, 1)
	_, errRec := store.ReadJournal(strings.NewReader(journal))
	j := loadJournal(t, "finished")
	j.recs[0].Data = bytes.Replace(j.recs[0].Data, []byte(`"format":1`), []byte(`"format":2`), 1)
	errJournal := resume(t, j, 0, newAnswers(), setup{}, nil).err
	for _, c := range []struct {
		err   error
		quote string
	}{
		{errSnap, "run: cannot restore snapshot of format 2 (this version reads format 1)"},
		{errRec, "store: record 2 (model_turn) has format version 2, but this build of loom reads and writes version 1 only"},
		{errJournal, "the journal is format 2; this build reads format 1"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.quote) {
			t.Errorf("loom says %v, not %q", c.err, c.quote)
		}
		if !strings.Contains(doc, c.quote) {
			t.Errorf("the document does not quote %q", c.quote)
		}
	}
	if !errors.Is(errRec, store.ErrVersion) {
		t.Errorf("record of version 2: %v", errRec)
	}
}
