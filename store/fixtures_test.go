package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loomkit/loom/llm"
	"github.com/loomkit/loom/store"
)

// format1Want is what a store derives from each fixture journal.
var format1Want = map[string]store.RunInfo{
	"finished": {Status: store.StatusDone, Turns: 2, LastSeq: 6, Model: "claude-sonnet-4-5", Prompt: "list the Go files", ConversationID: "conv-7",
		Created: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), Updated: time.Date(2026, 3, 1, 10, 0, 5, 1, time.UTC)},
	"waiting_approval": {Status: store.StatusWaitingApproval, Turns: 1, LastSeq: 3, Model: "gpt-5", Prompt: "delete the build directory",
		Created: time.Date(2026, 3, 2, 8, 30, 0, 0, time.UTC), Updated: time.Date(2026, 3, 2, 8, 30, 4, 1e8, time.UTC)},
	"interrupted": {Status: store.StatusInterrupted, Turns: 1, LastSeq: 3, Model: "claude-sonnet-4-5", Prompt: "write hello.txt", ConversationID: "conv-9",
		Created: time.Date(2026, 3, 3, 12, 0, 0, 0, time.UTC), Updated: time.Date(2026, 3, 3, 12, 0, 3, 2e8, time.UTC)},
	"failed": {Status: store.StatusFailed, Turns: 1, LastSeq: 5, Model: "deepseek-chat", Prompt: "summarize README.md",
		Error:   "model: rate limited: retry budget spent after 5 attempts",
		Created: time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC), Updated: time.Date(2026, 3, 4, 9, 0, 9, 0, time.UTC)},
	"approved": {Status: store.StatusInterrupted, Turns: 1, LastSeq: 4,
		Created: time.Date(2026, 3, 5, 7, 0, 0, 0, time.UTC), Updated: time.Date(2026, 3, 7, 18, 45, 0, 0, time.UTC)},
}

func TestFormat1Fixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/format1/*.jsonl")
	if err != nil || len(files) != len(format1Want) {
		t.Fatalf("found fixtures %v (%v), want %d", files, err, len(format1Want))
	}
	ctx := context.Background()
	s := store.NewMemory()
	for _, file := range files {
		id := strings.TrimSuffix(filepath.Base(file), ".jsonl")
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := store.ReadJournal(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, r := range recs {
			if _, err := s.Append(ctx, id, r.Seq-1, r); err != nil {
				t.Fatalf("%s: replaying record %d: %v", file, r.Seq, err)
			}
		}
		want := format1Want[id]
		want.ID = id
		got, err := s.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: run info\n%+v\nwant\n%+v", file, got, want)
		}
		loaded, err := s.Load(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := store.WriteJournal(&out, loaded); err != nil {
			t.Fatal(err)
		}
		if out.String() != string(raw) {
			t.Errorf("%s: stored and written back, the journal reads\n%s\nwant\n%s", file, out.String(), raw)
		}
	}

	raw, err := os.ReadFile("testdata/format1/conversation.json")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		t.Fatalf("conversation fixture: %v", err)
	}
	if err := llm.CheckHistory(msgs); err != nil {
		t.Fatalf("conversation fixture is not a valid history: %v", err)
	}
	if err := s.AppendConversation(ctx, "conv-7", "finished", msgs); err != nil {
		t.Fatal(err)
	}
	hist, err := s.History(ctx, "conv-7")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(hist)
	want, _ := json.Marshal(msgs)
	var compact bytes.Buffer
	json.Compact(&compact, raw)
	if string(got) != string(want) || string(want) != compact.String() {
		t.Fatalf("conversation fixture does not round-trip:\n%s\n%s", got, compact.String())
	}
}

func TestReadJournalRefusesBadInput(t *testing.T) {
	const first = `{"seq":1,"kind":"run_created","version":1,"time":"2026-03-01T10:00:00Z"}` + "\n"
	for _, c := range []struct {
		name, journal string
		target        error
		says          string
	}{
		{"newer version", first + `{"seq":2,"kind":"note","version":2,"time":"2026-03-01T10:00:00Z"}`, store.ErrVersion, "format version 2"},
		{"unknown kind", first + `{"seq":2,"kind":"tool_progress","version":1,"time":"2026-03-01T10:00:00Z"}`, store.ErrVersion, "tool_progress"},
		{"missing version", first + `{"seq":2,"kind":"note","time":"2026-03-01T10:00:00Z"}`, store.ErrVersion, "version 0"},
		{"unknown field", first + `{"seq":2,"kind":"note","version":1,"time":"2026-03-01T10:00:00Z","checksum":"x"}`, store.ErrInvalid, "checksum"},
		{"gap", first + `{"seq":3,"kind":"note","version":1,"time":"2026-03-01T10:00:00Z"}`, store.ErrInvalid, "want 2"},
		{"not first", `{"seq":1,"kind":"note","version":1,"time":"2026-03-01T10:00:00Z"}`, store.ErrInvalid, "run_created"},
		{"created twice", first + `{"seq":2,"kind":"run_created","version":1,"time":"2026-03-01T10:00:00Z"}`, store.ErrInvalid, "run_created"},
		{"not JSON", first + `{"seq":2,`, store.ErrInvalid, "line 2"},
		{"two values", first + `{"seq":2,"kind":"note","version":1,"time":"2026-03-01T10:00:00Z"} {}`, store.ErrInvalid, "more than one"},
		{"bad time", first + `{"seq":2,"kind":"note","version":1,"time":"yesterday"}`, store.ErrInvalid, "line 2"},
		{"huge line", first + `{"seq":2,"kind":"note","version":1,"data":"` + strings.Repeat("x", store.MaxDataSize+2<<20) + `"}`, store.ErrInvalid, "longer than"},
	} {
		_, err := store.ReadJournal(strings.NewReader(c.journal))
		if !errors.Is(err, c.target) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: error %v, want one matching %v that says %q", c.name, err, c.target, c.says)
		}
	}
	// Blank lines and a missing final newline are fine.
	recs, err := store.ReadJournal(strings.NewReader("\n" + first + "\n\n" + `{"seq":2,"kind":"note","version":1,"time":"2026-03-01T10:00:00Z"}`))
	if err != nil || len(recs) != 2 {
		t.Fatalf("journal with blank lines: %v, %v", recs, err)
	}
}

// An envelope member this build does not know is named together with the
// record version this build reads and the one the record claims; in a
// record of another version (or of none) it is that version's, refused
// as such.
func TestReadJournalNamesVersionsOfAnUnknownMember(t *testing.T) {
	const first = `{"seq":1,"kind":"run_created","version":1,"time":"2026-03-01T10:00:00Z"}` + "\n"
	for _, c := range []struct {
		name, line string
		target     error
		says       []string
	}{
		{"this version", `{"seq":2,"kind":"note","version":1,"time":"2026-03-01T10:00:00Z","checksum":"x"}`,
			store.ErrInvalid, []string{`"checksum"`, "line 2", "version 1, the only version this build of loom reads", "the record says it is version 1"}},
		{"member before version", `{"checksum":"x","seq":2,"kind":"note","version":1,"time":"2026-03-01T10:00:00Z"}`,
			store.ErrInvalid, []string{`"checksum"`, "the record says it is version 1"}},
		{"newer version", `{"seq":2,"kind":"note","version":2,"time":"2026-03-01T10:00:00Z","checksum":"x"}`,
			store.ErrVersion, []string{`"checksum"`, "line 2", "record 2 (note) has format version 2", "reads and writes version 1 only"}},
		{"no version", `{"seq":2,"kind":"note","time":"2026-03-01T10:00:00Z","checksum":"x"}`,
			store.ErrVersion, []string{`"checksum"`, "format version 0", "version 1 only"}},
	} {
		_, err := store.ReadJournal(strings.NewReader(first + c.line))
		if !errors.Is(err, c.target) {
			t.Errorf("%s: error %v, want one matching %v", c.name, err, c.target)
			continue
		}
		for _, w := range c.says {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
		var ve *store.VersionError
		if errors.As(err, &ve) != (c.target == store.ErrVersion) {
			t.Errorf("%s: %v is a *VersionError: %v", c.name, err, !(c.target == store.ErrVersion))
		}
	}
}
