package web

import (
	"encoding/json"
	"errors"
	"testing"
)

type strictInner struct {
	A *string `json:"a"`
}

// strictEmbedded is embedded in strictOuter: its keys are the outer body's keys too.
type strictEmbedded struct {
	AutoMin *float64 `json:"auto_min"`
}

type strictOuter struct {
	strictEmbedded
	Rate  *float64        `json:"rate_per_second"`
	Inner *strictInner    `json:"inner"`
	List  []strictInner   `json:"list"`
	Raw   json.RawMessage `json:"raw"`
	Skip  string          `json:"-"`
}

func TestStrictBodyAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body  string
		status      int
		code, field string
	}{
		{"exact keys", `{"rate_per_second":1,"inner":{"a":"x"},"list":[{"a":"y"}],"raw":{"any":1},"auto_min":2}`, 0, "", ""},
		{"escaped key is the same key", `{"rate\u005fper_second":1}`, 0, "", ""},
		{"differently-cased duplicate", `{"rate_per_second":1,"RATE_PER_SECOND":7}`, 422, codeUnknownField, "RATE_PER_SECOND"},
		{"misspelt key", `{"rate_per_secnd":9}`, 422, codeUnknownField, "rate_per_secnd"},
		{"cased key alone", `{"Rate_Per_Second":9}`, 422, codeUnknownField, "Rate_Per_Second"},
		{"nested unknown", `{"inner":{"a":"x","b":1}}`, 422, codeUnknownField, "inner.b"},
		{"nested in a list", `{"list":[{"a":"x"},{"A":"y"}]}`, 422, codeUnknownField, "list[1].A"},
		{"tag dash is no key", `{"-":1}`, 422, codeUnknownField, "-"},
		{"field name is no key", `{"Skip":"x"}`, 422, codeUnknownField, "Skip"},
		{"duplicate", `{"rate_per_second":1,"rate_per_second":7}`, 400, codeDuplicateKey, "rate_per_second"},
		{"duplicate by escape", `{"rate_per_second":1,"rate_per_\u0073econd":7}`, 400, codeDuplicateKey, "rate_per_second"},
		{"duplicate nested", `{"inner":{"a":"x","a":"y"}}`, 400, codeDuplicateKey, "inner.a"},
		{"duplicate inside raw", `{"raw":{"k":1,"k":2}}`, 400, codeDuplicateKey, "raw.k"},
		{"duplicate inside unknown", `{"zz":{"k":1,"k":2}}`, 400, codeDuplicateKey, "zz.k"},
		{"duplicate beats an earlier unknown", `{"zz":1,"rate_per_second":1,"rate_per_second":2}`, 400, codeDuplicateKey, "rate_per_second"},
		{"empty", ``, 400, "malformed_json", ""},
		{"blank", " \n", 400, "malformed_json", ""},
		{"not JSON", `{"rate_per_second":}`, 400, "malformed_json", ""},
		{"trailing data", `{} {}`, 400, "malformed_json", ""},
		{"not UTF-8", "{\"raw\":\"\xff\"}", 400, "malformed_json", ""},
		{"null", `null`, 422, "invalid_field", ""},
		{"array", `[]`, 422, "invalid_field", ""},
		{"wrong type", `{"rate_per_second":"fast"}`, 422, "invalid_field", "rate_per_second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v strictOuter
			err := decodeStrict([]byte(tc.body), &v)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err %v, want %d %s", err, tc.status, tc.code)
			}
			if e.Status != tc.status || e.Code != tc.code || e.Field != tc.field {
				t.Fatalf("got %d %s field %q (%s), want %d %s field %q", e.Status, e.Code, e.Field, e.Message, tc.status, tc.code, tc.field)
			}
		})
	}
}

func TestStrictBodyNamesTheKnownKey(t *testing.T) {
	t.Parallel()
	err := decodeStrict([]byte(`{"RATE_PER_SECOND":7}`), newQueueBody())
	var e *Error
	if !errors.As(err, &e) || e.Message != `Unknown field "RATE_PER_SECOND". Keys are case-sensitive: did you mean "rate_per_second"?` {
		t.Fatalf("got %v", err)
	}
}
