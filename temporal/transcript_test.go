package temporal

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
)

// roundTrip sends hist through a JSON payload, as Temporal does.
func roundTrip[T any](t testing.TB, v T) T {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkTranscript sends the transcript of hist the way the workflow does
// (a delta against what st says the store holds), resolves it the way the
// activity does, and checks the result is hist.
func checkTranscript(t testing.TB, st *transcriptState, r *resolver, hist []llm.Message) {
	t.Helper()
	ref, err := st.delta(hist)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.transcript(context.Background(), roundTrip(t, ref))
	if err != nil {
		t.Fatal(err)
	}
	want := roundTrip(t, hist)
	sameMessages(t, "transcript", want, got)
	st.advance(ref, "")
}

func weirdMessages() []llm.Message {
	return []llm.Message{
		llm.UserText("plain"),
		llm.UserText("<html> & \u2028 \x00 \xff\xfe invalid utf-8"),
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			llm.Thinking{Text: "hmm", Signature: "sig=="},
			llm.Text{Text: "calling"},
			llm.ToolCall{ID: "c1", Name: "t", Arguments: `{"a": [1, 2.50, "\u00e9"]}`, ProviderID: "p1"},
		}},
		{Role: llm.RoleUser, Parts: []llm.Part{
			llm.ToolResult{CallID: "c1", Name: "t", Content: strings.Repeat("result ", 200), IsError: true,
				Images: []llm.Image{{Data: []byte("\x89PNG\r\n\x1a\n\x00\xff"), MediaType: "image/png"}, {URL: "https://example.com/a.png"}}},
			llm.Image{Data: []byte{0, 1, 2, 255}, MediaType: "image/png"},
		}},
	}
}

func TestTranscriptDeltas(t *testing.T) {
	st := &transcriptState{}
	r := &resolver{cache: newBlobCache(&MemoryBlobs{}, 1<<20)}
	msgs := weirdMessages()
	for n := 1; n <= len(msgs); n++ {
		checkTranscript(t, st, r, msgs[:n])
		if st.BaseLen != n {
			t.Fatalf("base covers %d messages after sending %d", st.BaseLen, n)
		}
	}
	// Nothing new: the same node.
	ref, err := st.delta(msgs)
	if err != nil || len(ref.New) != 0 || ref.Node != st.Base {
		t.Fatalf("delta of nothing: %+v, %v", ref, err)
	}
}

// A known answer goes by key; a stored tool result's content goes by key
// inside its inline message; both come back whole.
func TestTranscriptReferences(t *testing.T) {
	st := &transcriptState{}
	store := &MemoryBlobs{}
	r := &resolver{cache: newBlobCache(store, 1<<20)}
	ctx := context.Background()
	hist := []llm.Message{llm.UserText("go")}
	checkTranscript(t, st, r, hist)

	answer := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCall{ID: "c1", Name: "t", Arguments: "{}"}}}
	key, data, _ := messageKey(answer)
	if err := store.Put(ctx, key, data); err != nil {
		t.Fatal(err)
	}
	st.remember(key)
	content := strings.Repeat("z", 2*minContentRef)
	if err := store.Put(ctx, contentKey(content), []byte(content)); err != nil {
		t.Fatal(err)
	}
	st.stored(contentKey(content))
	results := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
		llm.ToolResult{CallID: "c1", Name: "t", Content: content, Images: []llm.Image{{Data: []byte("GIF89a"), MediaType: "image/gif"}}},
		llm.Text{Text: "note"},
	}}
	hist = append(hist, answer, results)
	ref, err := st.delta(hist)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.New) != 2 || ref.New[0].Key != key || ref.New[1].Msg == nil || len(ref.New[1].Contents) != 1 {
		t.Fatalf("delta %+v", ref)
	}
	if sent, _ := json.Marshal(ref); strings.Contains(string(sent), content) {
		t.Fatal("the stored content was sent inline")
	}
	got, err := r.transcript(ctx, roundTrip(t, ref))
	if err != nil {
		t.Fatal(err)
	}
	sameMessages(t, "transcript", hist, got)
	if tr := hist[2].Parts[0].(llm.ToolResult); tr.Content != content {
		t.Fatal("delta modified the run's history")
	}
}

func TestTranscriptMissingAndForged(t *testing.T) {
	st := &transcriptState{}
	r := &resolver{cache: newBlobCache(&MemoryBlobs{}, 1<<20)}
	hist := weirdMessages()
	checkTranscript(t, st, r, hist[:2])
	ref, err := st.delta(hist)
	if err != nil {
		t.Fatal(err)
	}
	// Another worker, with a store of its own.
	other := &resolver{cache: newBlobCache(&MemoryBlobs{}, 1<<20)}
	if _, err := other.transcript(context.Background(), ref); !errors.Is(err, errMissing) {
		t.Fatalf("a base the store lacks: %v", err)
	}
	// A node key that does not cover the messages.
	bad := roundTrip(t, ref)
	bad.New[0].Msg.Parts = []llm.Part{llm.Text{Text: "forged"}}
	if _, err := r.transcript(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "differs") {
		t.Fatalf("a forged message: %v", err)
	}
	// A base count that does not match the chain.
	bad = roundTrip(t, ref)
	bad.BaseLen++
	if _, err := r.transcript(context.Background(), bad); err == nil {
		t.Fatal("a wrong base count was accepted")
	}
	// A missing tool list.
	if _, err := other.tools(context.Background(), &blobRef{Key: BlobKey([]byte("[]"))}); !errors.Is(err, errMissing) {
		t.Fatalf("a missing tool list: %v", err)
	}
	if _, err := other.tools(context.Background(), &blobRef{Key: BlobKey([]byte("[]")), Inline: []byte("[ ]")}); err == nil {
		t.Fatal("a tool list that does not match its key was accepted")
	}
}

// FuzzTranscript: any messages survive the trip through keys, deltas and
// the store.
func FuzzTranscript(f *testing.F) {
	f.Add("hello", "world", "{}", true)
	f.Add("<\xff>", "\u2028", `{"a":"\u00e9"}`, false)
	f.Add("", strings.Repeat("long ", 300), "not json", true)
	f.Fuzz(func(t *testing.T, a, b, args string, isErr bool) {
		st := &transcriptState{}
		store := &MemoryBlobs{}
		r := &resolver{cache: newBlobCache(store, 1<<20)}
		hist := []llm.Message{llm.UserText(a)}
		checkTranscript(t, st, r, hist)
		call := llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.Text{Text: b}, llm.ToolCall{ID: "c", Name: "n", Arguments: args}}}
		res := llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResult{CallID: "c", Content: b + a, IsError: isErr}}}
		if key, data, err := messageKey(call); err == nil && store.Put(context.Background(), key, data) == nil {
			st.remember(key)
		}
		content := roundTrip(t, res).Parts[0].(llm.ToolResult).Content
		if len(content) >= minContentRef && store.Put(context.Background(), contentKey(content), []byte(content)) == nil {
			st.stored(contentKey(content))
		}
		checkTranscript(t, st, r, roundTrip(t, append(hist, call, res)))
	})
}
