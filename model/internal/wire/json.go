package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
)

var jsonUnmarshal = json.Unmarshal

// jsonAny holds a JSON value that providers send in more than one shape
// (an error that is an object or a string, a code that is a string or a
// number).
type jsonAny struct {
	obj json.RawMessage // set when the value is an object
	str string          // set when the value is a string, or a number's text
	num bool            // the value is a number
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
		j.num = b[0] == '-' || (b[0] >= '0' && b[0] <= '9')
	}
	return nil
}

// status returns the HTTP status a numeric code names (OpenRouter's codes
// are statuses), 0 when the value is not an integer from 100 to 599.
func (j jsonAny) status() int {
	if !j.num {
		return 0
	}
	n, err := strconv.Atoi(j.str)
	if err != nil || n < 100 || n > 599 {
		return 0
	}
	return n
}

func (j jsonAny) text() string { return j.str }
