// Package docs holds the OpenAPI 3 description of the public API (openapi.yaml, the source
// of truth next to API.md) and its JSON form, which the server serves at
// GET /api/openapi.json.
package docs

import (
	_ "embed"
	"encoding/json"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// OpenAPIYAML is docs/openapi.yaml as written.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// openAPIJSON is the document converted once, at start-up.
var openAPIJSON, openAPIErr = toJSON(OpenAPIYAML)

// OpenAPIJSON returns the OpenAPI document as JSON. The slice is shared: do not modify it.
func OpenAPIJSON() ([]byte, error) { return openAPIJSON, openAPIErr }

// toJSON converts a YAML document to JSON.
func toJSON(y []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(y, &v); err != nil {
		return nil, fmt.Errorf("docs: openapi.yaml: %w", err)
	}
	v, err := jsonable(v)
	if err != nil {
		return nil, fmt.Errorf("docs: openapi.yaml: %w", err)
	}
	return json.Marshal(v)
}

// jsonable turns the maps YAML decodes into JSON objects (string keys only).
func jsonable(v any) (any, error) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			t[k] = j
		}
		return t, nil
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("key %v is not a string (quote it)", k)
			}
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			out[ks] = j
		}
		return out, nil
	case []any:
		for i, e := range t {
			j, err := jsonable(e)
			if err != nil {
				return nil, err
			}
			t[i] = j
		}
		return t, nil
	}
	return v, nil
}
