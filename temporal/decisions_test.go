package temporal

import (
	"errors"
	"testing"

	"github.com/loomkit/loom/run"
)

func TestParseDecision(t *testing.T) {
	for in, want := range map[string]run.Decision{
		"c1":                     {CallID: "c1", Action: run.Approved},
		"c1=approve":             {CallID: "c1", Action: run.Approved},
		"c1=deny":                {CallID: "c1", Action: run.Denied},
		"c1=deny:not: now":       {CallID: "c1", Action: run.Denied, Reason: "not: now"},
		"c1=abort:wrong plan":    {CallID: "c1", Action: run.Aborted, Reason: "wrong plan"},
		`c1=edit:{"path":"a:b"}`: {CallID: "c1", Action: run.Edited, Arguments: `{"path":"a:b"}`},
	} {
		got, err := ParseDecision(in)
		if err != nil || got != want {
			t.Errorf("ParseDecision(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "=approve", "c1=maybe", "c1=edit:[1]", "c1=edit:{", "c1=approve:why", "c1=edit:null"} {
		var ie *InputError
		if _, err := ParseDecision(in); !errors.As(err, &ie) || !errors.Is(err, ErrInput) {
			t.Errorf("ParseDecision(%q) = %v, want *InputError", in, err)
		}
	}
}
