package queue_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/waitroom/waitroom/queue"
)

// An allowed origin is stored in the one form a browser's Origin header carries, or refused
// with a 422 naming allowed_origins and saying what is wrong.
func TestNormalizeOriginPortsAndHosts(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://shop.example:8443":     "https://shop.example:8443",
		"https://shop.example:443":      "https://shop.example",
		"http://shop.example:80":        "http://shop.example",
		"http://shop.example:443":       "http://shop.example:443",
		"https://shop.example:65535":    "https://shop.example:65535",
		"https://shop.example:1":        "https://shop.example:1",
		"https://XN--BCHER-KVA.Example": "https://xn--bcher-kva.example",
		"https://my_shop.example":       "https://my_shop.example",
		"http://127.0.0.1:8080":         "http://127.0.0.1:8080",
		"https://[2001:db8::1]":         "https://[2001:db8::1]",
		"https://[2001:DB8::1]:8443/":   "https://[2001:db8::1]:8443",
		"https://[2001:db8:0:0::1]":     "https://[2001:db8::1]",
		"https://bücher.example":        "https://xn--bcher-kva.example",
		"https://ｓｈｏｐ.example":          "https://shop.example", // full-width letters map as a browser maps them
		"https://BÜCHER.example:8443/":  "https://xn--bcher-kva.example:8443",
		"https://localhost":             "https://localhost",
	} {
		if got, err := queue.NormalizeOrigin(in); err != nil || got != want {
			t.Errorf("%q → %q, %v; want %q", in, got, err, want)
		}
	}
	for in, says := range map[string]string{
		"https://shop.example:99999":                      "bad port",
		"https://shop.example:65536":                      "bad port",
		"https://shop.example:0":                          "bad port",
		"https://shop.example:0443":                       "bad port",
		"https://shop.example:00":                         "bad port",
		"https://shop.example:":                           "empty port",
		"https://[::1]:":                                  "empty port",
		"https://a‍‍.example":                             "not a valid international name",
		"https://shop.example.":                           "bad host",
		"https://-shop.example":                           "bad host",
		"https://shop-.example":                           "bad host",
		"https://sh%6Fp.example":                          "not an origin",
		"https://127.1":                                   "bad host",
		"https://0x7f.0.0.1":                              "bad host",
		"https://127.000.0.1":                             "bad host",
		"https://[fe80::1%25eth0]":                        "not an origin",
		"https://[1.2.3.4]":                               "not an origin",
		"https://" + strings.Repeat("a", 64) + ".example": "bad host",
	} {
		got, err := queue.NormalizeOrigin(in)
		var ie *queue.InvalidError
		if !errors.As(err, &ie) || ie.Field != "allowed_origins" || !strings.Contains(ie.Message, says) {
			t.Errorf("%q → %q, %v; want a refusal that says %q", in, got, err, says)
		}
	}
}
