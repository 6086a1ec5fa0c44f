package web

import (
	"io"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/rs/zerolog"
)

func TestETagMatches(t *testing.T) {
	t.Parallel()
	const etag = `"abc123"`
	for _, tc := range []struct {
		field string
		want  bool
	}{
		{`"abc123"`, true},
		{`W/"abc123"`, true}, // weak comparison: W/ does not matter for GET
		{`"x", "abc123"`, true},
		{`"x","abc123"`, true},
		{`"x" ,W/"abc123" , "y"`, true},
		{`*`, true},
		{` * `, true},
		{`, "abc123",`, true}, // empty list elements are no elements
		{`"x", "y"`, false},
		{`"abc"`, false},
		{`abc123`, false},       // not quoted: malformed
		{`"abc123`, false},      // unterminated
		{`"x" "abc123"`, false}, // no comma between two tags: malformed
		{`W/ "abc123"`, false},
		{`w/"abc123"`, false},      // W/ is case-sensitive
		{`"a b", "abc123"`, false}, // a space inside a tag: malformed, the list is not read on
		{`*, "abc123"`, false},     // "*" stands alone
		{``, false},
	} {
		if got := etagMatches(tc.field, etag); got != tc.want {
			t.Errorf("etagMatches(%q, %s) = %v, want %v", tc.field, etag, got, tc.want)
		}
	}
	if !etagMatches(`"abc123"`, `W/"abc123"`) {
		t.Error("a weak current ETag matches its strong spelling")
	}
	if etagMatches(`*`, `not-an-etag`) {
		t.Error("a malformed current ETag matches nothing")
	}
}

// The conditional GET works for every route that sets an ETag, with lists, W/ and *.
func TestNotModified(t *testing.T) {
	t.Parallel()
	app := fiber.New(fiber.Config{ErrorHandler: handleError(zerolog.Nop())})
	app.Use(noStore, notModified)
	app.Get("/logo", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderETag, `"v1"`)
		c.Set(fiber.HeaderCacheControl, "public, max-age=300, must-revalidate")
		c.Set(fiber.HeaderContentType, "image/png")
		return c.SendString("png bytes")
	})
	app.Get("/gone", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderETag, `"v1"`)
		return errorf(404, "logo_not_found", "This queue has no logo.")
	})
	app.Post("/logo", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderETag, `"v1"`)
		return c.SendString("changed")
	})
	for _, tc := range []struct {
		method, path, inm string
		want              int
	}{
		{"GET", "/logo", `"v1"`, 304},
		{"GET", "/logo", `"v0", "v1"`, 304},
		{"GET", "/logo", `W/"v1"`, 304},
		{"GET", "/logo", `*`, 304},
		{"HEAD", "/logo", `"v0", W/"v1"`, 304},
		{"GET", "/logo", `"v0"`, 200},
		{"GET", "/logo", ``, 200},
		{"GET", "/gone", `*`, 404}, // no current representation: never 304
		{"POST", "/logo", `"v1"`, 200},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if tc.inm != "" {
			req.Header.Set("If-None-Match", tc.inm)
		}
		res, err := app.Test(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != tc.want {
			t.Fatalf("%s %s If-None-Match %s: %d, want %d", tc.method, tc.path, tc.inm, res.StatusCode, tc.want)
		}
		if tc.want == 304 {
			if len(body) != 0 || res.Header.Get("ETag") != `"v1"` || res.Header.Get("Cache-Control") != "public, max-age=300, must-revalidate" {
				t.Fatalf("304: body %q, ETag %q, Cache-Control %q: want no body and the 200's validators", body, res.Header.Get("ETag"), res.Header.Get("Cache-Control"))
			}
		}
	}
}
