package web

import (
	"errors"
	"strings"
	"testing"
)

func TestPowJoinBody(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
	}{
		{"empty", ``, 0, ""},
		{"white space", " \n", 0, ""},
		{"empty object", `{}`, 0, ""},
		{"proof and invite", `{"pow":{"challenge":"a.b","nonce":"1"},"invite":"abc"}`, 0, ""},
		{"null pow", `{"pow":null}`, 0, ""},
		{"not JSON", `{"pow":`, 400, "malformed_json"},
		{"trailing garbage", `{} x`, 400, "malformed_json"},
		{"an array", `[]`, 400, "malformed_json"},
		{"a string", `"x"`, 400, "malformed_json"},
		{"null", `null`, 400, "malformed_json"},
		{"unknown field", `{"pow":{"challenge":"a","nonce":"b"},"extra":1}`, 400, "bad_request"},
		{"unknown field in pow", `{"pow":{"challenge":"a","nonce":"b","bits":3}}`, 400, "bad_request"},
		{"field name in capitals", `{"POW":{"challenge":"a","nonce":"b"}}`, 400, "bad_request"},
		{"nonce in capitals", `{"pow":{"challenge":"a","Nonce":"b"}}`, 400, "bad_request"},
		{"pow of the wrong type", `{"pow":"abc"}`, 422, "pow_invalid"},
		{"nonce of the wrong type", `{"pow":{"challenge":"a","nonce":1}}`, 422, "pow_invalid"},
		{"pow without nonce", `{"pow":{"challenge":"a"}}`, 422, "pow_invalid"},
		{"invite of the wrong type", `{"invite":5}`, 422, "invite_invalid"},
		{"invite too long", `{"invite":"` + strings.Repeat("a", 129) + `"}`, 422, "invite_invalid"},
		{"a key twice", `{"invite":"a","invite":"b"}`, 400, "duplicate_key"},
		{"a pow key twice", `{"pow":{"challenge":"a","nonce":"b","nonce":"c"}}`, 400, "duplicate_key"},
		{"a differently-cased key", `{"Invite":"a"}`, 400, "bad_request"},
		{"an unknown key in pow", `{"pow":{"challenge":"a","nonce":"b","salt":"c"}}`, 400, "bad_request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseJoinBody([]byte(tc.body))
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e := mapError(err)
			if err == nil || e.Status != tc.status || e.Code != tc.code {
				t.Fatalf("got %v, want %d %s", err, tc.status, tc.code)
			}
			if e.Status == 422 && e.Field == "" {
				t.Fatalf("422 without a field: %+v", e)
			}
		})
	}
}

func FuzzJoinBody(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"pow":{"challenge":"a","nonce":"b"}}`, `{"invite":"x"}`, `{"pow":1}`, `[`, `null`, `{"x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		jb, err := parseJoinBody(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("parse error without a status: %v", err)
			}
			if e.Status != 400 && e.Status != 422 {
				t.Fatalf("body %q: status %d", body, e.Status)
			}
			return
		}
		if jb.Pow != nil && (jb.Pow.Challenge == nil || jb.Pow.Nonce == nil) {
			t.Fatalf("body %q accepted with half a proof", body)
		}
		if jb.Invite != nil && len(*jb.Invite) > maxInvite {
			t.Fatalf("body %q accepted with a long invite", body)
		}
	})
}
