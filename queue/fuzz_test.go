package queue_test

import (
	"testing"

	"github.com/waitroom/waitroom/queue"
)

func FuzzParseTicket(f *testing.F) {
	s := queue.NewSigner([]byte("fuzz-secret"))
	_, good := s.New("drop")
	for _, seed := range []string{good, "", "a.b.c", "drop..", "drop.AAAAAAAAAAAAAAAAAAAAAA.", good + "=", "../../x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tk, err := s.Parse(raw)
		if err != nil {
			return
		}
		// Anything accepted must be exactly a ticket this signer issues.
		if s.String(tk) != raw || !queue.ValidName(tk.Queue) {
			t.Fatalf("accepted %q as %+v", raw, tk)
		}
	})
}

func FuzzValidName(f *testing.F) {
	for _, seed := range []string{"demo", "", "a b", "../etc", "ü", "x_y-Z9", string(make([]byte, 65))} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !queue.ValidName(s) {
			return
		}
		if len(s) < 1 || len(s) > 64 {
			t.Fatalf("accepted %q (length %d)", s, len(s))
		}
		for _, c := range s {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
				t.Fatalf("accepted %q with %q", s, c)
			}
		}
	})
}
