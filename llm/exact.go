package llm

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// UnmarshalExact decodes the one JSON value in data into v, a non-nil
// pointer, the way loom reads its versioned documents: a member v's type
// does not have is refused (as with json.Decoder.DisallowUnknownFields),
// nothing may follow the value, and member names are exact: a member
// spelt in another case than the type's, or given twice, is refused with
// a *MemberError (encoding/json alone would match the first without
// regard to case and keep the last of the second). On error, v may hold
// part of the document.
func UnmarshalExact(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// More would miss a stray ] or }: only white space may follow.
	if len(bytes.TrimLeft(data[dec.InputOffset():], " \t\r\n")) > 0 {
		return errors.New("trailing data after the JSON value")
	}
	return CheckMembers(data, v)
}

// CheckMembers reports, as a *MemberError, the first member of the JSON
// value in data that decoding it into v's type with encoding/json would
// match to a field by folding case rather than by its exact name, or that
// is given twice in its object. Members the type does not have are none
// of its concern (UnmarshalExact refuses them). It does not look inside
// values that are kept as they are or decoded by their own method:
// json.RawMessage, interfaces, and types implementing json.Unmarshaler
// (which check their members themselves, as Message does). data must be
// valid JSON: decode it first. v may be a pointer to the type, or a value
// of it.
func CheckMembers(data []byte, v any) error {
	t := reflect.TypeOf(v)
	if t == nil {
		return nil
	}
	c := checker{data: data}
	return c.value(shapeOf(t))
}

// MemberError is a member that is given twice in its object, or whose
// name is another spelling (by case) of a member loom knows.
type MemberError struct {
	// Path is the JSON Pointer (RFC 6901) of the object that holds the
	// member, "" for the document itself.
	Path string
	// Member is the member's name as written.
	Member string
	// Want is the name loom knows, when Member is that name in another
	// case; it is empty when Member is given twice.
	Want string
}

func (e *MemberError) Error() string {
	where := ""
	if e.Path != "" {
		where = " in " + e.Path
	}
	if e.Want == "" {
		return fmt.Sprintf("member %q is given twice%s: a member may appear once", e.Member, where)
	}
	return fmt.Sprintf("member %q%s is not %q: member names are matched exactly", e.Member, where, e.Want)
}

// shape is what the checker knows of a Go type: which JSON objects and
// arrays in a document of it are decoded member by member.
type shape struct {
	kind   shapeKind
	names  map[string]int // struct: exact member name to field
	fields []string       // struct: member names, by field
	types  []*shape       // struct: shapes, by field
	elem   *shape         // array and map: the shape of the elements
}

type shapeKind uint8

const (
	opaqueShape shapeKind = iota // not looked into
	structShape
	mapShape
	arrayShape
)

var (
	shapes          sync.Map // reflect.Type → *shape
	shapesMu        sync.Mutex
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
	opaque          = &shape{}
)

func shapeOf(t reflect.Type) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	shapesMu.Lock()
	defer shapesMu.Unlock()
	building := map[reflect.Type]*shape{}
	s := buildShape(t, building)
	for bt, bs := range building {
		shapes.Store(bt, bs)
	}
	return s
}

// buildShape builds t's shape; building holds the shapes under
// construction, so that recursive types end.
func buildShape(t reflect.Type, building map[reflect.Type]*shape) *shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := shapes.Load(t); ok {
		return s.(*shape)
	}
	if s, ok := building[t]; ok {
		return s
	}
	if t == rawMessageType || reflect.PointerTo(t).Implements(unmarshalerType) || reflect.PointerTo(t).Implements(textType) {
		return opaque
	}
	switch t.Kind() {
	case reflect.Struct:
		s := &shape{kind: structShape, names: map[string]int{}}
		building[t] = s
		addFields(s, t, building, 0)
		return s
	case reflect.Map:
		s := &shape{kind: mapShape}
		building[t] = s
		s.elem = buildShape(t.Elem(), building)
		return s
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			return opaque // base64
		}
		el := buildShape(t.Elem(), building)
		if el == opaque {
			return opaque
		}
		s := &shape{kind: arrayShape, elem: el}
		building[t] = s
		return s
	}
	return opaque
}

// addFields adds the members of struct t, as encoding/json names them:
// the tag's name or the field's, promoted from untagged embedded structs;
// a name given at a shallower depth wins.
func addFields(s *shape, t reflect.Type, building map[reflect.Type]*shape, depth int) {
	if depth > 8 {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addFields(s, ft, building, depth+1)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, taken := s.names[name]; taken {
			continue
		}
		s.names[name] = len(s.fields)
		s.fields = append(s.fields, name)
		s.types = append(s.types, buildShape(f.Type, building))
	}
}

// checker walks one JSON value, which encoding/json has decoded already.
type checker struct {
	data []byte
	i    int
	path []pathStep
}

type pathStep struct {
	key   []byte // nil for an array index
	index int
}

var errNotJSON = errors.New("llm: the document is not valid JSON")

func (c *checker) ws() {
	for c.i < len(c.data) {
		switch c.data[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *checker) value(s *shape) error {
	c.ws()
	if c.i >= len(c.data) {
		return errNotJSON
	}
	switch b := c.data[c.i]; {
	case b == '{' && s.kind == structShape:
		return c.object(s)
	case b == '{' && s.kind == mapShape:
		return c.object(s)
	case b == '[' && s.kind == arrayShape:
		return c.array(s.elem)
	}
	return c.skip()
}

func (c *checker) array(el *shape) error {
	c.i++ // [
	c.ws()
	if c.i < len(c.data) && c.data[c.i] == ']' {
		c.i++
		return nil
	}
	for n := 0; ; n++ {
		c.path = append(c.path, pathStep{index: n})
		if err := c.value(el); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
		c.ws()
		if c.i >= len(c.data) {
			return errNotJSON
		}
		switch c.data[c.i] {
		case ',':
			c.i++
		case ']':
			c.i++
			return nil
		default:
			return errNotJSON
		}
	}
}

// object checks an object decoded into a struct (s.kind structShape) or
// a map.
func (c *checker) object(s *shape) error {
	c.i++ // {
	var seenSmall uint64
	var seenBig map[int]bool
	var others [][]byte // names that are no field (map keys, unknown members)
	var otherSet map[string]bool
	for first := true; ; first = false {
		c.ws()
		if c.i >= len(c.data) {
			return errNotJSON
		}
		if c.data[c.i] == '}' && first {
			c.i++
			return nil
		}
		key, err := c.key()
		if err != nil {
			return err
		}
		c.ws()
		if c.i >= len(c.data) || c.data[c.i] != ':' {
			return errNotJSON
		}
		c.i++
		field, known := -1, false
		if s.kind == structShape {
			field, known = s.names[string(key)]
		}
		switch {
		case known && field < 64:
			if seenSmall&(1<<field) != 0 {
				return c.errorAt(key, "")
			}
			seenSmall |= 1 << field
		case known:
			if seenBig[field] {
				return c.errorAt(key, "")
			}
			if seenBig == nil {
				seenBig = map[int]bool{}
			}
			seenBig[field] = true
		default:
			if s.kind == structShape {
				for _, name := range s.fields {
					if strings.EqualFold(name, string(key)) {
						return c.errorAt(key, name)
					}
				}
			}
			if otherSet != nil {
				if otherSet[string(key)] {
					return c.errorAt(key, "")
				}
				otherSet[string(key)] = true
			} else {
				for _, o := range others {
					if bytes.Equal(o, key) {
						return c.errorAt(key, "")
					}
				}
				others = append(others, key)
				if len(others) > 8 {
					otherSet = make(map[string]bool, 2*len(others))
					for _, o := range others {
						otherSet[string(o)] = true
					}
				}
			}
		}
		el := opaque
		switch {
		case known:
			el = s.types[field]
		case s.kind == mapShape:
			el = s.elem
		}
		c.path = append(c.path, pathStep{key: key})
		if err := c.value(el); err != nil {
			return err
		}
		c.path = c.path[:len(c.path)-1]
		c.ws()
		if c.i >= len(c.data) {
			return errNotJSON
		}
		switch c.data[c.i] {
		case ',':
			c.i++
		case '}':
			c.i++
			return nil
		default:
			return errNotJSON
		}
	}
}

// key reads a member name: its bytes in the document when it has no
// escapes, else its decoded text.
func (c *checker) key() ([]byte, error) {
	if c.data[c.i] != '"' {
		return nil, errNotJSON
	}
	start := c.i + 1
	escaped := false
	for j := start; j < len(c.data); j++ {
		switch c.data[j] {
		case '\\':
			escaped = true
			j++
		case '"':
			c.i = j + 1
			if !escaped {
				return c.data[start:j], nil
			}
			var s string
			if err := json.Unmarshal(c.data[start-1:j+1], &s); err != nil {
				return nil, errNotJSON
			}
			return []byte(s), nil
		}
	}
	return nil, errNotJSON
}

// skipString passes over a string without decoding it: to the next
// quote not escaped by an odd run of backslashes.
func (c *checker) skipString() error {
	for j := c.i + 1; j < len(c.data); {
		k := bytes.IndexByte(c.data[j:], '"')
		if k < 0 {
			break
		}
		q := j + k
		n := 0
		for b := q - 1; b > c.i && c.data[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			c.i = q + 1
			return nil
		}
		j = q + 1
	}
	return errNotJSON
}

// skip passes over one value without looking into it.
func (c *checker) skip() error {
	depth := 0
	for c.i < len(c.data) {
		switch c.data[c.i] {
		case '"':
			if err := c.skipString(); err != nil {
				return err
			}
			if depth == 0 {
				return nil
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return nil // the end of the object or array holding a literal
			}
			depth--
			if depth == 0 {
				c.i++
				return nil
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return nil
			}
		}
		c.i++
	}
	if depth != 0 {
		return errNotJSON
	}
	return nil
}

func (c *checker) errorAt(key []byte, want string) error {
	var b strings.Builder
	for _, p := range c.path {
		b.WriteByte('/')
		if p.key == nil {
			b.WriteString(strconv.Itoa(p.index))
			continue
		}
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(string(p.key)))
	}
	return &MemberError{Path: b.String(), Member: string(key), Want: want}
}
