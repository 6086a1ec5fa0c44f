package main

import (
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/waitroom/waitroom/queue"
)

// TestOpenAPIFollowsTheSettingsTable: docs/openapi.yaml describes every queue setting of the
// table (queue/settingtable.go) in the PUT body and in the QueueSettings and QueueStats answers, with the
// row's type and choices, and the body with the row's bounds — the one hand-written place a new setting is named, held
// to the row.
func TestOpenAPIFollowsTheSettingsTable(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	put := doc.Paths.Find("/admin/api/queues/{name}")
	if put == nil || put.Put == nil || put.Put.RequestBody == nil {
		t.Fatal("no PUT /admin/api/queues/{name} with a body in the document")
	}
	body := put.Put.RequestBody.Value.Content.Get("application/json").Schema.Value
	answer := doc.Components.Schemas["QueueSettings"].Value
	stats := doc.Components.Schemas["QueueStats"].Value
	for _, s := range []struct {
		name   string
		schema *openapi3.Schema
		bounds bool // the body states the refused ranges; an answer need not repeat them
	}{{"the PUT body", body, true}, {"QueueSettings", answer, false}, {"QueueStats", stats, false}} {
		for _, row := range queue.SettingsTable() {
			ref := s.schema.Properties[row.JSON]
			if ref == nil || ref.Value == nil {
				t.Errorf("%s lacks %s", s.name, row.JSON)
				continue
			}
			p := ref.Value
			if want := openAPIType(row.Kind); !p.Type.Is(want) && !slices.Contains(anyOfTypes(p), want) {
				t.Errorf("%s.%s: type %v, want %s", s.name, row.JSON, p.Type, want)
			}
			if s.bounds && row.Ranged && row.Kind != queue.KindList {
				if p.Min == nil || *p.Min != row.Min || p.Max == nil || *p.Max != row.Max {
					t.Errorf("%s.%s: bounds %v–%v, want %v–%v", s.name, row.JSON, bound(p.Min), bound(p.Max), row.Min, row.Max)
				}
			}
			if row.Kind == queue.KindChoice {
				var enum []string
				for _, e := range p.Enum {
					if v, ok := e.(string); ok && v != "" {
						enum = append(enum, v)
					}
				}
				if !slices.Equal(enum, row.Choices) {
					t.Errorf("%s.%s: enum %v, want %v", s.name, row.JSON, enum, row.Choices)
				}
			}
		}
	}
}

func openAPIType(k queue.SettingKind) string {
	switch k {
	case queue.KindFloat:
		return "number"
	case queue.KindInt, queue.KindDuration:
		return "integer"
	case queue.KindBool:
		return "boolean"
	case queue.KindList:
		return "array"
	case queue.KindObject:
		return "object"
	}
	return "string"
}

// anyOfTypes is the types of a property written as anyOf/oneOf (a value or null).
func anyOfTypes(p *openapi3.Schema) []string {
	var out []string
	for _, rs := range append(append(openapi3.SchemaRefs{}, p.AnyOf...), p.OneOf...) {
		if rs.Value != nil && rs.Value.Type != nil {
			out = append(out, rs.Value.Type.Slice()...)
		}
	}
	return out
}

func bound(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}
