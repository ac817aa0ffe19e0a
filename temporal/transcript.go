package temporal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/loomkit/loom/llm"
)

// How a transcript travels to the model activity (see "Bounded history" in
// the package doc).
//
// Every message is a blob under BlobKey(json.Marshal(message)). A chain
// node lists the keys of the messages one model call added and names the
// node before it, so the node key of a call covers the whole transcript up
// to it, the way a commit covers a tree. The workflow sends a model call
// the node key of the transcript the previous call stored (base), and the
// messages since then: by key when it knows the store holds them (the
// previous answer), else inline (tool results, prompts). The activity
// stores what came inline and the new node, and the workflow moves its
// base forward when the call succeeds.

// msgRef is one message of a transcript delta: its key, or the message
// itself. An inline message may leave the content of some tool results
// out, naming the blob that holds it instead (the tool activity stored it):
// a tool's output then appears in the history once, as the activity's
// result, not a second time in the next model call.
type msgRef struct {
	Key      string       `json:"k,omitempty"`
	Msg      *llm.Message `json:"m,omitempty"`
	Contents []partRef    `json:"c,omitempty"`
}

// partRef names the blob holding the content of part Part (a tool
// result) of an inline message.
type partRef struct {
	Part int    `json:"p"`
	Key  string `json:"k"`
}

// minContentRef is the smallest tool result content sent by reference;
// smaller ones cost less inline than their key.
const minContentRef = 512

// contentKey returns the key of a tool result's content.
func contentKey(content string) string { return BlobKey([]byte(content)) }

// chainNode is the blob of one step of a transcript chain.
type chainNode struct {
	Prev string   `json:"prev,omitempty"`
	Len  int      `json:"len"`
	Msgs []string `json:"msgs"`
}

// transcriptRef is the transcript a model call is given: the messages of
// Base (BaseLen of them) followed by New. Node is the key of the chain
// node that covers all of it, which the activity stores (and checks).
type transcriptRef struct {
	Base    string   `json:"base,omitempty"`
	BaseLen int      `json:"base_len,omitempty"`
	New     []msgRef `json:"new,omitempty"`
	Node    string   `json:"node,omitempty"`
}

// blobRef is a value by key, or inline with its key.
type blobRef struct {
	Key    string          `json:"k"`
	Inline json.RawMessage `json:"v,omitempty"`
}

// messageKey returns the key of m and its encoding. The encoding is
// canonical: the one a message decoded from a payload has, so the workflow
// and the activity (which got m through JSON) agree on the key. They
// differ only where m holds invalid UTF-8, which JSON replaces.
func messageKey(m llm.Message) (string, []byte, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return "", nil, err
	}
	if bytes.Contains(data, []byte(`\ufffd`)) {
		var back llm.Message
		if err := json.Unmarshal(data, &back); err != nil {
			return "", nil, err
		}
		if data, err = json.Marshal(back); err != nil {
			return "", nil, err
		}
	}
	return BlobKey(data), data, nil
}

func nodeKey(n chainNode) (string, []byte) {
	data, err := json.Marshal(n)
	if err != nil {
		panic(err) // strings and an int: cannot fail
	}
	return BlobKey(data), data
}

// maxKnown bounds how many stored keys beyond the base the workflow
// remembers: only the latest answers are ever looked up.
const maxKnown = 8

// transcriptState is the workflow's knowledge of what the store holds.
// It is plain data, carried over continue-as-new.
type transcriptState struct {
	Base     string   `json:"base,omitempty"`
	BaseLen  int      `json:"base_len,omitempty"`
	Known    []string `json:"known,omitempty"`
	ToolsKey string   `json:"tools_key,omitempty"` // the tool list the store holds
	// Contents are keys of tool result contents stored since the last
	// model call.
	Contents []string `json:"contents,omitempty"`
}

func (s *transcriptState) known(key string) bool {
	for _, k := range s.Known {
		if k == key {
			return true
		}
	}
	return false
}

func (s *transcriptState) remember(key string) {
	if s.known(key) {
		return
	}
	s.Known = append(s.Known, key)
	if len(s.Known) > maxKnown {
		s.Known = append(s.Known[:0:0], s.Known[len(s.Known)-maxKnown:]...)
	}
}

// reset forgets everything, so the next call sends the whole transcript
// inline (after an activity found the store without it).
func (s *transcriptState) reset() { *s = transcriptState{} }

// delta returns the transcriptRef for hist, given what the store holds.
func (s *transcriptState) delta(hist []llm.Message) (transcriptRef, error) {
	if s.BaseLen > len(hist) {
		// Cannot happen (history only grows); start over rather than
		// send a wrong transcript.
		s.reset()
	}
	ref := transcriptRef{Base: s.Base, BaseLen: s.BaseLen}
	node := chainNode{Prev: s.Base, Len: len(hist)}
	for i := s.BaseLen; i < len(hist); i++ {
		key, _, err := messageKey(hist[i])
		if err != nil {
			return transcriptRef{}, fmt.Errorf("message %d: %w", i, err)
		}
		node.Msgs = append(node.Msgs, key)
		if s.known(key) {
			ref.New = append(ref.New, msgRef{Key: key})
		} else {
			ref.New = append(ref.New, s.inline(hist[i]))
		}
	}
	if len(node.Msgs) == 0 {
		ref.Node = s.Base
	} else {
		ref.Node, _ = nodeKey(node)
	}
	return ref, nil
}

// inline returns m as an inline msgRef, with the tool result contents the
// store holds by key.
func (s *transcriptState) inline(m llm.Message) msgRef {
	if len(s.Contents) == 0 {
		return msgRef{Msg: &m}
	}
	var refs []partRef
	var parts []llm.Part
	for i, p := range m.Parts {
		tr, ok := p.(llm.ToolResult)
		if !ok || len(tr.Content) < minContentRef {
			continue
		}
		key := contentKey(tr.Content)
		if !slices.Contains(s.Contents, key) {
			continue
		}
		if parts == nil {
			parts = slices.Clone(m.Parts)
		}
		tr.Content = ""
		parts[i] = tr
		refs = append(refs, partRef{Part: i, Key: key})
	}
	if refs == nil {
		return msgRef{Msg: &m}
	}
	m.Parts = parts
	return msgRef{Msg: &m, Contents: refs}
}

// stored records that the store holds a tool result's content.
func (s *transcriptState) stored(key string) {
	if key != "" && !slices.Contains(s.Contents, key) {
		s.Contents = append(s.Contents, key)
	}
}

// advance records that the store holds ref's transcript (the call
// succeeded), and answerKey, the key of the answer the call stored.
func (s *transcriptState) advance(ref transcriptRef, answerKey string) {
	if ref.Node != "" {
		s.Base, s.BaseLen = ref.Node, ref.BaseLen+len(ref.New)
	}
	if answerKey != "" {
		s.remember(answerKey)
	}
	s.Contents = nil
}

// tools returns the tool list as a blobRef: by key once the store holds
// it, else inline.
func (s *transcriptState) tools(specs []llm.ToolSpec) (*blobRef, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	data, err := json.Marshal(specs)
	if err != nil {
		return nil, err
	}
	key := BlobKey(data)
	if key == s.ToolsKey {
		return &blobRef{Key: key}, nil
	}
	return &blobRef{Key: key, Inline: data}, nil
}

// errMissing is returned by the activity side when the store lacks a
// blob the input names.
var errMissing = errors.New("blob missing")

// resolver assembles transcripts on the activity side.
type resolver struct {
	cache *blobCache
}

// chain returns the message keys of the chain ending at node, which
// must cover n messages.
func (r *resolver) chain(ctx context.Context, node string, n int) ([]string, error) {
	if node == "" {
		if n != 0 {
			return nil, fmt.Errorf("transcript: %d base messages but no base node", n)
		}
		return nil, nil
	}
	var nodes []chainNode
	for key := node; key != ""; {
		nd, err := r.node(ctx, key)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, nd)
		if len(nodes) > 1_000_000 {
			return nil, fmt.Errorf("transcript: chain at %s does not end", node)
		}
		key = nd.Prev
	}
	if nodes[0].Len != n {
		return nil, fmt.Errorf("transcript: base node %s covers %d messages, the input says %d", node, nodes[0].Len, n)
	}
	keys := make([]string, 0, n)
	for i := len(nodes) - 1; i >= 0; i-- {
		keys = append(keys, nodes[i].Msgs...)
	}
	if len(keys) != n {
		return nil, fmt.Errorf("transcript: chain at %s lists %d messages, its node says %d", node, len(keys), n)
	}
	return keys, nil
}

// node returns the chain node stored under key.
func (r *resolver) node(ctx context.Context, key string) (chainNode, error) {
	if v, ok := r.cache.decoded(key); ok {
		return v.(chainNode), nil
	}
	data, err := r.cache.get(ctx, key)
	if errors.Is(err, ErrBlobNotFound) {
		return chainNode{}, fmt.Errorf("%w: chain node %s: %v", errMissing, key, err)
	}
	if err != nil {
		return chainNode{}, err
	}
	var nd chainNode
	if err := json.Unmarshal(data, &nd); err != nil {
		return chainNode{}, fmt.Errorf("transcript: chain node %s: %w", key, err)
	}
	r.cache.setDecoded(key, nd)
	return nd, nil
}

// message returns the message stored under key. Messages are shared
// between the requests a worker assembles: models must not modify them.
func (r *resolver) message(ctx context.Context, key string) (llm.Message, error) {
	if v, ok := r.cache.decoded(key); ok {
		return v.(llm.Message), nil
	}
	data, err := r.cache.get(ctx, key)
	if errors.Is(err, ErrBlobNotFound) {
		return llm.Message{}, fmt.Errorf("%w: message %s: %v", errMissing, key, err)
	}
	if err != nil {
		return llm.Message{}, err
	}
	var m llm.Message
	if err := json.Unmarshal(data, &m); err != nil {
		return llm.Message{}, fmt.Errorf("transcript: message %s: %w", key, err)
	}
	r.cache.setDecoded(key, m)
	return m, nil
}

// transcript returns the messages ref names, storing what came inline and
// the node that covers them.
func (r *resolver) transcript(ctx context.Context, ref transcriptRef) ([]llm.Message, error) {
	keys, err := r.chain(ctx, ref.Base, ref.BaseLen)
	if err != nil {
		return nil, err
	}
	msgs := make([]llm.Message, 0, len(keys)+len(ref.New))
	for _, k := range keys {
		m, err := r.message(ctx, k)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	node := chainNode{Prev: ref.Base, Len: ref.BaseLen + len(ref.New)}
	for i, nm := range ref.New {
		switch {
		case nm.Msg != nil:
			m, err := r.fill(ctx, *nm.Msg, nm.Contents)
			if err != nil {
				return nil, err
			}
			nm.Msg = &m
			key, data, err := messageKey(m)
			if err != nil {
				return nil, fmt.Errorf("transcript: new message %d: %w", i, err)
			}
			if err := r.cache.put(ctx, key, data); err != nil {
				return nil, err
			}
			r.cache.setDecoded(key, *nm.Msg)
			node.Msgs = append(node.Msgs, key)
			msgs = append(msgs, *nm.Msg)
		case nm.Key != "":
			m, err := r.message(ctx, nm.Key)
			if err != nil {
				return nil, err
			}
			node.Msgs = append(node.Msgs, nm.Key)
			msgs = append(msgs, m)
		default:
			return nil, fmt.Errorf("transcript: new message %d has neither key nor content", i)
		}
	}
	if len(node.Msgs) > 0 {
		key, data := nodeKey(node)
		if key != ref.Node {
			return nil, fmt.Errorf("transcript: the workflow's node key %s differs from %s computed here: the message encoding differs between workflow and worker", ref.Node, key)
		}
		if err := r.cache.put(ctx, key, data); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

// fill puts the contents refs name back into m's tool results.
func (r *resolver) fill(ctx context.Context, m llm.Message, refs []partRef) (llm.Message, error) {
	if len(refs) == 0 {
		return m, nil
	}
	m.Parts = slices.Clone(m.Parts)
	for _, ref := range refs {
		if ref.Part < 0 || ref.Part >= len(m.Parts) {
			return m, fmt.Errorf("transcript: content for part %d of a message of %d parts", ref.Part, len(m.Parts))
		}
		tr, ok := m.Parts[ref.Part].(llm.ToolResult)
		if !ok {
			return m, fmt.Errorf("transcript: content for part %d, which is not a tool result", ref.Part)
		}
		data, err := r.cache.get(ctx, ref.Key)
		if errors.Is(err, ErrBlobNotFound) {
			return m, fmt.Errorf("%w: tool result content %s: %v", errMissing, ref.Key, err)
		}
		if err != nil {
			return m, err
		}
		tr.Content = string(data)
		m.Parts[ref.Part] = tr
	}
	return m, nil
}

// tools returns the tool list ref names, storing it if it came inline.
func (r *resolver) tools(ctx context.Context, ref *blobRef) ([]llm.ToolSpec, error) {
	if ref == nil {
		return nil, nil
	}
	data := []byte(ref.Inline)
	if len(data) > 0 {
		if BlobKey(data) != ref.Key {
			return nil, errors.New("transcript: the tool list does not match its key")
		}
		if err := r.cache.put(ctx, ref.Key, data); err != nil {
			return nil, err
		}
	} else {
		var err error
		data, err = r.cache.get(ctx, ref.Key)
		if errors.Is(err, ErrBlobNotFound) {
			return nil, fmt.Errorf("%w: tool list %s: %v", errMissing, ref.Key, err)
		}
		if err != nil {
			return nil, err
		}
	}
	var specs []llm.ToolSpec
	if err := json.Unmarshal(data, &specs); err != nil {
		return nil, fmt.Errorf("transcript: tool list: %w", err)
	}
	return specs, nil
}
