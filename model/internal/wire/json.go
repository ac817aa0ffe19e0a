package wire

import (
	"bytes"
	"encoding/json"
)

var jsonUnmarshal = json.Unmarshal

// jsonAny holds a JSON value that providers send in more than one shape
// (an error that is an object or a string, a code that is a string or a
// number).
type jsonAny struct {
	obj json.RawMessage // set when the value is an object
	str string          // set when the value is a string, or a number's text
}

func (j *jsonAny) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
	case b[0] == '{':
		j.obj = append(json.RawMessage(nil), b...)
	case b[0] == '"':
		return json.Unmarshal(b, &j.str)
	case b[0] == '[':
		// FastAPI's {"detail":[{"msg":...}]}: keep it as text.
		j.str = string(b)
	default:
		j.str = string(b)
	}
	return nil
}

func (j jsonAny) text() string { return j.str }
