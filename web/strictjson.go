package web

// Strict JSON bodies. encoding/json alone matches keys case-insensitively, ignores unknown
// ones and keeps the last of a key given twice, so {"rate_per_second":1,"RATE_PER_SECOND":7}
// stores 7 and a misspelt key is a silent no-op. decodeStrict checks the keys first, on the
// same tokens encoding/json reads, and only then decodes: every key that reaches
// json.Unmarshal is one of the target's own names, spelt exactly.

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Codes of the strict decoder's refusals (besides malformed_json and invalid_field, which
// the lenient decodeBody uses too).
const (
	codeDuplicateKey = "duplicate_key" // 400: a key given twice in one object
	codeUnknownField = "unknown_field" // 422: a key the body does not take (or a differently-cased one)
)

// decodeStrict reads a JSON object body into v (a pointer to a struct) with exactly the
// keys v's type names in its json tags, case-sensitive:
//   - empty, not UTF-8, not JSON, or JSON followed by more → 400 malformed_json;
//   - a key given twice in one object, at any depth → 400 duplicate_key (field: its path);
//   - not an object (an array, a string, null …) → 422 invalid_field;
//   - any other key, a differently-cased one included → 422 unknown_field with field = that
//     key (its path, like "pow.extra", inside a nested struct); a json.RawMessage, map or
//     interface value takes any keys (the caller reads it);
//   - a value of the wrong type → 422 invalid_field naming the field.
//
// Syntax and duplicates are checked over the whole body before any key is judged, so one
// body always gets the same answer whatever order its keys come in.
func decodeStrict(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errorf(400, "malformed_json", "The request body must be a JSON object.")
	}
	if !utf8.Valid(body) {
		return errorf(400, "malformed_json", "The request body is not valid UTF-8.")
	}
	if !json.Valid(body) {
		return errorf(400, "malformed_json", "The request body is not valid JSON.")
	}
	if bytes.TrimSpace(body)[0] != '{' {
		return errorf(422, "invalid_field", "The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	w := keyWalk{dec: dec}
	if err := w.value(reflect.TypeOf(v), ""); err != nil {
		// json.Valid passed, so the tokens cannot fail; kept for safety.
		return errorf(400, "malformed_json", "The request body is not valid JSON.")
	}
	if w.hasDup {
		return &Error{Status: 400, Code: codeDuplicateKey, Field: w.dup,
			Message: "Key " + strconv.Quote(w.dup) + " is given twice; give each key once."}
	}
	if w.hasUnknown {
		return unknownFieldError(w.unknown, w.unknownIn)
	}
	return decodeBody(body, v)
}

// unknownFieldError is the 422 for a key the body does not take; a key that differs from a
// known one only in case is told so.
func unknownFieldError(path string, known []string) *Error {
	key := path[strings.LastIndexByte(path, '.')+1:]
	msg := "Unknown field " + strconv.Quote(path) + "."
	for _, k := range known {
		if strings.EqualFold(k, key) {
			msg += " Keys are case-sensitive: did you mean " + strconv.Quote(k) + "?"
			return &Error{Status: 422, Code: codeUnknownField, Field: path, Message: msg}
		}
	}
	if len(known) > 0 {
		msg += " This body takes " + strings.Join(known, ", ") + "."
	}
	return &Error{Status: 422, Code: codeUnknownField, Field: path, Message: msg}
}

// keyWalk reads one JSON value's tokens, noting the first key given twice and the first
// key the target type does not take.
type keyWalk struct {
	dec        *json.Decoder
	hasDup     bool
	dup        string // path of the first duplicate key
	hasUnknown bool
	unknown    string   // path of the first unknown key ("" is a key too)
	unknownIn  []string // the keys its object takes
}

var rawMessageType = reflect.TypeFor[json.RawMessage]()

// value reads one value whose target type is t (nil: anything goes, keys are only checked
// for duplicates).
func (w *keyWalk) value(t reflect.Type, path string) error {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType {
		t = nil
	}
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		var fields map[string]reflect.Type
		var names []string
		if t != nil && t.Kind() == reflect.Struct {
			fields, names = jsonFields(t)
		}
		var elem reflect.Type
		if t != nil && t.Kind() == reflect.Map {
			elem = t.Elem()
		}
		seen := map[string]bool{}
		for w.dec.More() {
			kt, err := w.dec.Token()
			if err != nil {
				return err
			}
			k, _ := kt.(string)
			kp := k
			if path != "" {
				kp = path + "." + k
			}
			if seen[k] && !w.hasDup {
				w.hasDup, w.dup = true, kp
			}
			seen[k] = true
			next := elem
			if fields != nil {
				ft, ok := fields[k]
				if !ok && !w.hasUnknown {
					w.hasUnknown, w.unknown, w.unknownIn = true, kp, names
				}
				next = ft
			}
			if err := w.value(next, kp); err != nil {
				return err
			}
		}
		_, err = w.dec.Token() // '}'
		return err
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			if err := w.value(elem, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
		_, err = w.dec.Token() // ']'
		return err
	}
	return nil
}

// fieldSet is a struct type's JSON keys: each key's type and the keys in order.
type fieldSet struct {
	types map[string]reflect.Type
	names []string
}

var fieldSets sync.Map // reflect.Type → fieldSet

// jsonFields lists the keys encoding/json reads into struct type t: exported fields by
// their tag's name (or the field's name), "-" left out, embedded structs' fields promoted.
func jsonFields(t reflect.Type) (map[string]reflect.Type, []string) {
	if fs, ok := fieldSets.Load(t); ok {
		f := fs.(fieldSet)
		return f.types, f.names
	}
	f := fieldSet{types: map[string]reflect.Type{}}
	collectFields(t, &f)
	fieldSets.Store(t, f)
	return f.types, f.names
}

func collectFields(t reflect.Type, f *fieldSet) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := sf.Type
		if sf.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				collectFields(et, f)
				continue
			}
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		if _, dup := f.types[name]; !dup {
			f.names = append(f.names, name)
		}
		f.types[name] = ft
	}
}
