package web

import (
	"testing"

	"github.com/waitroom/waitroom/queue"
)

func TestReturnTarget(t *testing.T) {
	t.Parallel()
	allowed := []string{"https://shop.example", "http://127.0.0.2:8090"}
	good := []string{
		"https://shop.example",
		"https://shop.example/",
		"https://shop.example/checkout?step=2",
		"https://SHOP.example/x",
		"http://127.0.0.2:8090/redirect.html",
		"https://shop.example/path%20with%20space",
	}
	for _, u := range good {
		if got, ok := returnTarget(u, allowed); !ok || got != u {
			t.Errorf("%q refused", u)
		}
	}
	bad := []string{
		"",
		"//evil.example",
		"//shop.example/x",
		"/relative",
		"https://shop.example.evil.example/",
		"https://shop.example@evil.example/",
		"https://user:pw@shop.example/",
		"https://evil.example/?https://shop.example",
		"https://evil.example#https://shop.example",
		"https://shop.example/#frag",
		"https://shop.example:443/", // not the allowed origin as written
		"http://shop.example/",      // another scheme
		"https://shop.example:8443/",
		"javascript:alert(1)",
		"JavaScript://shop.example/%0aalert(1)",
		"data:text/html,<script>alert(1)</script>",
		"https:shop.example",
		"https:/shop.example",
		"https:%2F%2Fevil.example",
		"https://shop.example%2eevil.example/",
		"https://shop.example%40evil.example/",
		"https://shop%2Eexample/",
		"https://shop.example\\@evil.example/",
		"https://shop.example\\.evil.example/",
		"https://shop.example /x",
		"https://shop.example\t/x",
		"https://shop.example/\nLocation: https://evil.example",
		"https://shоp.example/", // Cyrillic о
		"ftp://shop.example/",
		"https://shop.example" + string(make([]byte, 3000)),
	}
	for _, u := range bad {
		if got, ok := returnTarget(u, allowed); ok {
			t.Errorf("%q accepted as %q", u, got)
		}
	}
	if _, ok := returnTarget("https://shop.example/", nil); ok {
		t.Error("accepted with no allowed origin")
	}
}

func TestNormalizeOrigin(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://Shop.Example":    "https://shop.example",
		"http://127.0.0.2:8090":   "http://127.0.0.2:8090",
		"https://shop.example/":   "https://shop.example",
		"https://[::1]:8443":      "https://[::1]:8443",
		"HTTPS://shop.example":    "https://shop.example",
		"https://xn--shp-sdd.com": "https://xn--shp-sdd.com",
	} {
		if got, err := queue.NormalizeOrigin(in); err != nil || got != want {
			t.Errorf("%q → %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "*", "null", "shop.example", "//shop.example", "https://", "https://shop.example/path",
		"https://shop.example?x", "https://shop.example#x", "https://u@shop.example", "ftp://shop.example",
		"https://shop.example:99999999", "https://shop.example:abc", " https://shop.example", "https://shop.example\\"} {
		if got, err := queue.NormalizeOrigin(in); err == nil {
			t.Errorf("%q accepted as %q", in, got)
		}
	}
}
