package llm_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/loomkit/loom/llm"
)

type exactInner struct {
	Kind  string `json:"kind"`
	Count int    `json:"count,omitempty"`
}

type exactEmbedded struct {
	Label string `json:"label"`
}

type exactDoc struct {
	exactEmbedded
	Name   string          `json:"name"`
	Items  []exactInner    `json:"items,omitempty"`
	ByKey  map[string]int  `json:"by_key,omitempty"`
	Raw    json.RawMessage `json:"raw,omitempty"`
	Any    any             `json:"any,omitempty"`
	Msg    *llm.Message    `json:"msg,omitempty"`
	Plain  string
	hidden int
}

func TestUnmarshalExact(t *testing.T) {
	for _, c := range []struct {
		doc  string
		path string // of the member refused; "-" when accepted
		bad  string // the member refused
		want string // the name it should have been; "" for a member given twice
	}{
		{doc: `{"name":"a","label":"l","items":[{"kind":"x","count":2}],"by_key":{"A":1,"a":2},"Plain":"p"}`, path: "-"},
		// Escapes are read as what they spell.
		{doc: `{"na\u006de":"a"}`, path: "-"},
		{doc: `{"\u004eame":"a"}`, bad: "Name", want: "name"},
		{doc: `{"Name":"a"}`, bad: "Name", want: "name"},
		{doc: `{"NAME":"a"}`, bad: "NAME", want: "name"},
		{doc: `{"plain":"p"}`, bad: "plain", want: "Plain"},
		{doc: `{"Label":"l"}`, bad: "Label", want: "label"},
		{doc: `{"name":"a","name":"b"}`, bad: "name"},
		{doc: `{"name":"a","Name":"b"}`, bad: "Name", want: "name"},
		{doc: `{"items":[{"kind":"x"},{"Kind":"y"}]}`, path: "/items/1", bad: "Kind", want: "kind"},
		// encoding/json folds the Kelvin sign to k.
		{doc: `{"items":[{"\u212aind":"x"}]}`, path: "/items/0", bad: "\u212aind", want: "kind"},
		{doc: `{"items":[{"kind":"x","count":1,"count":2}]}`, path: "/items/0", bad: "count"},
		// Map keys are the document's own, but appear once.
		{doc: `{"by_key":{"a~/b":1,"a~/b":2}}`, path: "/by_key", bad: "a~/b"},
		// Kept as given, or decoded by their own method.
		{doc: `{"raw":{"X":1,"X":2},"any":{"y":1,"y":2}}`, path: "-"},
		{doc: `{"msg":{"role":"user","Parts":[]}}`, bad: "Parts", want: "parts"},
		{doc: `{"msg":{"role":"user","parts":[{"type":"text","text":"a","text":"b"}]}}`, bad: "text"},
		{doc: `{"msg":{"role":"user","parts":[{"Type":"text","text":"a"}]}}`, bad: "Type", want: "type"},
	} {
		var v exactDoc
		err := llm.UnmarshalExact([]byte(c.doc), &v)
		if c.path == "-" {
			if err != nil {
				t.Errorf("%s: %v", c.doc, err)
			}
			continue
		}
		var me *llm.MemberError
		if !errors.As(err, &me) {
			t.Errorf("%s: err = %v, want a *MemberError", c.doc, err)
			continue
		}
		if me.Member != c.bad || me.Want != c.want || (c.path != "" && me.Path != c.path) {
			t.Errorf("%s: %+v, want member %q, want %q, path %q", c.doc, *me, c.bad, c.want, c.path)
		}
		if !strings.Contains(err.Error(), `"`+c.bad+`"`) {
			t.Errorf("%s: %q does not name %q", c.doc, err, c.bad)
		}
	}
}

func TestMemberErrorPathEscapes(t *testing.T) {
	var v struct {
		M map[string]exactInner `json:"m"`
	}
	err := llm.UnmarshalExact([]byte(`{"m":{"a/b~c":{"Kind":"x"}}}`), &v)
	var me *llm.MemberError
	if !errors.As(err, &me) || me.Path != "/m/a~1b~0c" {
		t.Fatalf("err = %v", err)
	}
}

// CheckMembers leaves unknown members to the decoder, and checks values.
func TestCheckMembersIgnoresUnknownMembers(t *testing.T) {
	var h struct {
		Model string `json:"model"`
	}
	if err := llm.CheckMembers([]byte(`{"model":"m","config":{"Model":1,"x":[1,{"y":2}]}}`), &h); err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckMembers([]byte(`{"other":1,"other":2}`), h); err == nil {
		t.Fatal("a member given twice passes")
	}
	if err := llm.CheckMembers([]byte(`{"MODEL":"m"}`), h); err == nil {
		t.Fatal("another case passes")
	}
}

// A type that refers to itself is checked at every depth.
type exactTree struct {
	Name     string       `json:"name"`
	Children []*exactTree `json:"children,omitempty"`
}

func TestCheckMembersRecursiveType(t *testing.T) {
	var v exactTree
	err := llm.UnmarshalExact([]byte(`{"name":"a","children":[{"name":"b","children":[{"Name":"c"}]}]}`), &v)
	var me *llm.MemberError
	if !errors.As(err, &me) || me.Path != "/children/0/children/0" {
		t.Fatalf("err = %v", err)
	}
}

// UnmarshalExact accepts only what encoding/json accepts, and decodes it
// the same way; CheckMembers never panics, on any input.
func FuzzUnmarshalExact(f *testing.F) {
	for _, s := range []string{
		`{"name":"a","items":[{"kind":"x"}]}`, `{"Name":1}`, `{"name":"a","name":"b"}`,
		`{"by_key":{"a":1,"a":2}}`, `{"raw":[1,{"a":"\"}"}]}`, `[]`, `{`, `{"items":[{"kind":"}`,
		`{"msg":{"role":"user","parts":[{"type":"text","text":"hi"}]}}`, ` {"name" : "a" } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		llm.CheckMembers(data, &exactDoc{})
		var exact exactDoc
		if llm.UnmarshalExact(data, &exact) != nil {
			return
		}
		var plain exactDoc
		if err := json.Unmarshal(data, &plain); err != nil {
			t.Fatalf("UnmarshalExact accepts what encoding/json refuses (%v): %q", err, data)
		}
		if !reflect.DeepEqual(exact, plain) {
			t.Fatalf("UnmarshalExact decodes %q as %+v, encoding/json as %+v", data, exact, plain)
		}
	})
}

func BenchmarkCheckMembers(b *testing.B) {
	type rec struct {
		Seq     int64           `json:"seq"`
		Kind    string          `json:"kind"`
		Version int             `json:"version"`
		Data    json.RawMessage `json:"data,omitempty"`
	}
	doc := []byte(`{"seq":2,"kind":"tool_result","version":1,"data":{"turn":3,"result":{"call_id":"call_1","content":"x"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := llm.CheckMembers(doc, &rec{}); err != nil {
			b.Fatal(err)
		}
	}
}
