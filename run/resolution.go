package run

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/loomkit/loom/llm"
)

// Resolution is the driver's decision about an invalid tool call, given to
// Resolve. The set is closed: Fail, Retry, Repair, Skip and Stop. Encode one
// with MarshalResolution (journals record them).
type Resolution interface {
	resolution() string
}

// Fail fails the run with *UnknownToolError.
type Fail struct{}

// Retry rejects the whole turn: the assistant turn is committed unchanged
// with one result per call (Feedback for the invalid call, a fixed
// not-executed text for the others), nothing runs, and the model is called
// again. It spends the turn budget and one of Config.MaxInvalidRetries;
// beyond those the run fails.
type Retry struct {
	Feedback string `json:"feedback"`
}

// Repair renames the call to Name, which must be allowed on the turn
// (else the run fails with *UnknownToolError naming Name).
type Repair struct {
	Name string `json:"name"`
}

// Skip answers the invalid call with Reason and every other call of the
// turn with a fixed not-executed text; nothing runs. Refused (the run fails)
// under tool choice none.
type Skip struct {
	Reason string `json:"reason"`
}

// Stop fails the run with *StoppedError carrying Reason.
type Stop struct {
	Reason string `json:"reason"`
}

func (Fail) resolution() string   { return "fail" }
func (Retry) resolution() string  { return "retry" }
func (Repair) resolution() string { return "repair" }
func (Skip) resolution() string   { return "skip" }
func (Stop) resolution() string   { return "stop" }

// MarshalResolution encodes res as a JSON object tagged by a "type" member:
// {"type":"repair","name":"search"}.
func MarshalResolution(res Resolution) ([]byte, error) {
	if res == nil {
		return nil, fmt.Errorf("run: cannot encode a nil resolution")
	}
	body, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`{"type":"`)
	b.WriteString(res.resolution())
	b.WriteByte('"')
	if len(body) > 2 {
		b.WriteByte(',')
		b.Write(body[1:])
	} else {
		b.WriteByte('}')
	}
	return b.Bytes(), nil
}

// UnmarshalResolution decodes what MarshalResolution encoded, refusing
// unknown types and fields.
func UnmarshalResolution(data []byte) (Resolution, error) {
	var tagged struct {
		Type     string  `json:"type"`
		Feedback *string `json:"feedback"`
		Name     *string `json:"name"`
		Reason   *string `json:"reason"`
	}
	if err := strictDecode(data, &tagged); err != nil {
		return nil, fmt.Errorf("run: resolution: %w", err)
	}
	extra := func(want string) error {
		fields := map[string]bool{"feedback": tagged.Feedback != nil, "name": tagged.Name != nil, "reason": tagged.Reason != nil}
		for f, set := range fields {
			if set && f != want {
				return fmt.Errorf("run: resolution %q has no field %q", tagged.Type, f)
			}
		}
		return nil
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	var res Resolution
	var want string
	switch tagged.Type {
	case "fail":
		res = Fail{}
	case "retry":
		res, want = Retry{Feedback: str(tagged.Feedback)}, "feedback"
	case "repair":
		res, want = Repair{Name: str(tagged.Name)}, "name"
	case "skip":
		res, want = Skip{Reason: str(tagged.Reason)}, "reason"
	case "stop":
		res, want = Stop{Reason: str(tagged.Reason)}, "reason"
	default:
		return nil, fmt.Errorf("run: unknown resolution type %q (want fail, retry, repair, skip or stop)", tagged.Type)
	}
	if err := extra(want); err != nil {
		return nil, err
	}
	return res, nil
}

// Action is what a Decision does with a call awaiting approval.
type Action string

const (
	// Approved lets the call run as the model made it.
	Approved Action = "approved"
	// Edited lets the call run with Decision.Arguments instead (a JSON
	// object; empty means {}). The edited call is what history records.
	Edited Action = "edited"
	// Denied does not run the call; its result is
	// "Tool call denied: <Reason>" with IsError set.
	Denied Action = "denied"
	// Aborted stops the run with *StoppedError carrying Reason.
	Aborted Action = "aborted"
)

// Decision answers one call listed by ApproveTools. It encodes to JSON as
// it is, for journals and for approvals that arrive from elsewhere.
type Decision struct {
	CallID    string `json:"call_id"`
	Action    Action `json:"action"`
	Arguments string `json:"arguments,omitempty"` // for Edited
	Reason    string `json:"reason,omitempty"`    // for Denied and Aborted
}

func strictDecode(data []byte, v any) error {
	return llm.UnmarshalExact(data, v)
}
