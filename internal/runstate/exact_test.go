package runstate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/loomkit/loom/agent"
	"github.com/loomkit/loom/run"
	"github.com/loomkit/loom/store"
)

// A member name is matched exactly, and given at most once (docs/run-state.md,
// "General rules"). encoding/json alone matches names without regard to
// case and keeps the last of a member given twice; loom refuses both, with
// an error naming the member, wherever a member is read: run snapshots,
// journal envelopes and payloads (messages and parts included), agent
// snapshots.

// mutation changes one member of the object at a JSON pointer.
type mutation struct {
	at, name string
	twice    bool // give the member twice; else respell it in another case
}

// key is the member name the error must quote.
func (m mutation) key() string {
	if m.twice {
		return m.name
	}
	return recase(m.name)
}

func (m mutation) String() string {
	if m.twice {
		return fmt.Sprintf("%q twice at %q", m.name, m.at)
	}
	return fmt.Sprintf("%q as %q at %q", m.name, recase(m.name), m.at)
}

// recase returns name with its first letter in the other case.
func recase(name string) string {
	r, n := utf8.DecodeRuneInString(name)
	if unicode.IsUpper(r) {
		return string(unicode.ToLower(r)) + name[n:]
	}
	return string(unicode.ToUpper(r)) + name[n:]
}

// mutations lists both mutations of every member of every object of doc
// outside the opaque members (whose content loom keeps as given).
func mutations(t *testing.T, doc []byte) []mutation {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	var out []mutation
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch x := v.(type) {
		case map[string]any:
			names := make([]string, 0, len(x))
			for k := range x {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				out = append(out, mutation{at: at, name: k}, mutation{at: at, name: k, twice: true})
				if !opaque[k] {
					walk(x[k], at+"/"+k)
				}
			}
		case []any:
			for i, e := range x {
				walk(e, fmt.Sprintf("%s/%d", at, i))
			}
		}
	}
	walk(v, "")
	return out
}

// apply returns doc with m applied, re-encoded token by token so that the
// order of members, and a member given twice, survive.
func apply(t *testing.T, doc []byte, m mutation) []byte {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var out bytes.Buffer
	var value func(at string)
	token := func() json.Token {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// raw copies the next value as it is.
	raw := func() []byte {
		var r json.RawMessage
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	writeKey := func(k string) {
		b, _ := json.Marshal(k)
		out.Write(b)
		out.WriteByte(':')
	}
	value = func(at string) {
		switch tok := token().(type) {
		case json.Delim:
			switch tok {
			case '{':
				out.WriteByte('{')
				first := true
				for dec.More() {
					k := token().(string)
					if !first {
						out.WriteByte(',')
					}
					first = false
					here := at == m.at && k == m.name
					switch {
					case here && m.twice:
						v := raw()
						writeKey(k)
						out.Write(v)
						out.WriteByte(',')
						writeKey(k)
						out.Write(v)
					case here:
						writeKey(recase(k))
						out.Write(raw())
					default:
						writeKey(k)
						value(at + "/" + k)
					}
				}
				token()
				out.WriteByte('}')
			case '[':
				out.WriteByte('[')
				for i := 0; dec.More(); i++ {
					if i > 0 {
						out.WriteByte(',')
					}
					value(fmt.Sprintf("%s/%d", at, i))
				}
				token()
				out.WriteByte(']')
			}
		default:
			b, err := json.Marshal(tok)
			if err != nil {
				t.Fatal(err)
			}
			out.Write(b)
		}
	}
	value("")
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("trailing data after the document: %v", err)
	}
	return out.Bytes()
}

// refusedNaming checks that err refuses m, naming its member.
func refusedNaming(err error, m mutation) bool {
	return err != nil && strings.Contains(err.Error(), strconv.Quote(m.key()))
}

func TestSnapshotMemberNamesAreExact(t *testing.T) {
	checked := 0
	for _, f := range allSnapshots(t) {
		doc := read(t, f)
		for _, m := range mutations(t, doc) {
			bad := apply(t, doc, m)
			var r run.Run
			err := json.Unmarshal(bad, &r)
			if !errors.Is(err, run.ErrSnapshot) || !refusedNaming(err, m) {
				t.Errorf("%s: %s: loom says %v", filepath.Base(f), m, err)
			}
			checked++
		}
	}
	if checked < 400 {
		t.Fatalf("only %d mutations checked", checked)
	}
}

func TestJournalMemberNamesAreExact(t *testing.T) {
	checked := 0
	seen := map[string]bool{} // kind and shape of the member: one journal suffices
	for _, name := range []string{"finished", "approved", "resolved", "wrapped_up", "retried_output", "continued", "crashed_in_write"} {
		j := loadJournal(t, name)
		for i, rec := range j.recs {
			line, err := json.Marshal(rec)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range mutations(t, line) {
				id := fmt.Sprintf("%s %s %v %s", rec.Kind, shape(m.at), m.twice, m.name)
				if seen[id] {
					continue
				}
				seen[id] = true
				checked++
				bad := apply(t, line, m)
				if m.at == "" { // the envelope, read by the store
					journal, _ := json.Marshal(j.recs[0])
					if i == 0 {
						journal = nil
					}
					_, err := store.ReadJournal(bytes.NewReader(append(append(journal, '\n'), bad...)))
					if !errors.Is(err, store.ErrInvalid) || !refusedNaming(err, m) {
						t.Errorf("%s record %d: %s: ReadJournal = %v", name, rec.Seq, m, err)
					}
					continue
				}
				var r store.Record
				if err := json.Unmarshal(bad, &r); err != nil {
					t.Fatal(err)
				}
				recs := slices.Clone(j.recs)
				recs[i] = r
				if err := resumeRecords(t, j, recs, name); !refusedNaming(err, m) {
					t.Errorf("%s record %d (%s): %s: loom says %v", name, rec.Seq, rec.Kind, m, err)
				}
			}
		}
	}
	if checked < 200 {
		t.Fatalf("only %d mutations checked", checked)
	}
}

// resumeRecords stores recs as the journal's run and resumes it: the error
// of the store (which reads run_created's header) or of the resumption.
func resumeRecords(t *testing.T, j journal, recs []store.Record, name string) error {
	t.Helper()
	mem := store.NewMemory()
	if _, err := mem.Append(context.Background(), j.id, 0, recs...); err != nil {
		return err
	}
	jj := j
	jj.recs = recs
	h := resumeIn(t, mem, jj, newAnswers(), scenarioNamed(t, name).setup, nil)
	if h.err != nil && !errors.Is(h.err, agent.ErrResume) {
		return fmt.Errorf("not a resume error: %w", h.err)
	}
	return h.err
}

func TestAgentSnapshotMemberNamesAreExact(t *testing.T) {
	checked := 0
	for _, name := range []string{"suspended", "cancelled"} {
		doc := read(t, filepath.Join(agentFixtures, name+".json"))
		for _, m := range mutations(t, doc) {
			if strings.HasPrefix(m.at, "/run") {
				continue // the run snapshot: TestSnapshotMemberNamesAreExact
			}
			bad := apply(t, doc, m)
			a := newAgent(t, &world{}, newAnswers(text(usage(1, 1), "x"), text(usage(1, 1), "x")), nil, nil, setup{approver: agent.AllowAll})
			_, err := a.Resume(context.Background(), agent.Resumption{Snapshot: bad})
			if !errors.Is(err, agent.ErrResume) || !refusedNaming(err, m) {
				t.Errorf("%s: %s: Resume = %v", name, m, err)
			}
			checked++
		}
	}
	if checked < 10 {
		t.Fatalf("only %d mutations checked", checked)
	}
}

// The mutations are what they claim: applied to a fixture, each changes
// exactly one member, and the document stays valid JSON that
// encoding/json alone accepts.
func TestMutationsChangeOneMember(t *testing.T) {
	doc := read(t, fixture("advancing_skipped"))
	for _, m := range mutations(t, doc)[:6] {
		bad := apply(t, doc, m)
		if !json.Valid(bad) || bytes.Equal(bad, doc) {
			t.Fatalf("%s: not a changed JSON document", m)
		}
		var before, after map[string]any
		json.Unmarshal(doc, &before)
		json.Unmarshal(bad, &after)
		if m.at == "" && !m.twice {
			if _, ok := after[recase(m.name)]; !ok {
				t.Errorf("%s: %s not in the document", m, recase(m.name))
			}
		}
		if m.twice && !bytes.Contains(bad, []byte(strconv.Quote(m.name))) {
			t.Errorf("%s: member missing", m)
		}
	}
	same := apply(t, doc, mutation{at: "/nowhere", name: "x"})
	var a, b any
	json.Unmarshal(doc, &a)
	json.Unmarshal(same, &b)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("re-encoding without a mutation changes the document")
	}
}

// Nothing but white space follows a document: json.Decoder.More alone
// lets a stray ] or } through.
func TestTrailingDataIsRefused(t *testing.T) {
	doc := read(t, fixture("advancing_skipped"))
	for _, tail := range []string{"]", "}", " {}", "x"} {
		var r run.Run // UnmarshalJSON itself: json.Unmarshal checks the whole input first
		if err := r.UnmarshalJSON(append(bytes.Clone(doc), tail...)); !errors.Is(err, run.ErrSnapshot) {
			t.Errorf("snapshot + %q: %v", tail, err)
		}
		ls := lines(t, filepath.Join(journalFixtures, "finished.jsonl"))
		journal := append(append(ls[0], tail...), '\n')
		if _, err := store.ReadJournal(bytes.NewReader(journal)); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("record + %q: %v", tail, err)
		}
	}
	var r run.Run
	if err := r.UnmarshalJSON(append(bytes.Clone(doc), " \n\t"...)); err != nil {
		t.Errorf("white space after the snapshot: %v", err)
	}
}

// docs/run-state.md quotes the errors loom gives.
func TestDocQuotesMemberErrors(t *testing.T) {
	doc := space.ReplaceAllString(string(read(t, docPath)), " ")
	snap := read(t, fixture("advancing_skipped"))
	for _, c := range []struct {
		m     mutation
		quote string
	}{
		{mutation{name: "turn"}, `member "Turn" is not "turn": member names are matched exactly`},
		{mutation{name: "turn", twice: true}, `member "turn" is given twice: a member may appear once`},
	} {
		var r run.Run
		err := r.UnmarshalJSON(apply(t, snap, c.m))
		if err == nil || !strings.Contains(err.Error(), c.quote) {
			t.Errorf("%s: loom says %v, not %q", c.m, err, c.quote)
		}
		if !strings.Contains(doc, c.quote) {
			t.Errorf("the document does not quote %q", c.quote)
		}
	}
}
