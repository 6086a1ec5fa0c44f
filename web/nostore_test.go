package web

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/rs/zerolog"
)

// The default is no-store; a handler may allow a cache; an error never is cached; the
// routes open to other origins vary by Origin whether or not the request sent one.
func TestNoStoreDefault(t *testing.T) {
	t.Parallel()
	app := fiber.New(fiber.Config{ErrorHandler: handleError(zerolog.Nop())})
	app.Use(noStore)
	app.Get("/api/queues/:queue/status", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"ticket": "secret"}) })
	app.Get("/api/queues/:queue/draw/order", func(c *fiber.Ctx) error {
		c.Set(fiber.HeaderCacheControl, "public, max-age=60")
		if c.Query("fail") != "" {
			return errorf(404, "no_draw", "Not yet.")
		}
		return c.SendString("order")
	})
	app.Get("/admin/api/stats", func(c *fiber.Ctx) error { return errorf(401, "unauthorized", "No.") })
	for _, tc := range []struct {
		path, origin, cache string
		vary                bool
	}{
		{"/api/queues/q/status", "", "no-store", true},
		{"/api/queues/q/status", "https://shop.example", "no-store", true},
		{"/api/queues/q/draw/order", "", "public, max-age=60", true},
		{"/api/queues/q/draw/order?fail=1", "", "no-store", true},
		{"/admin/api/stats", "", "no-store", false},
		{"/no/such/route", "", "no-store", false},
	} {
		req := httptest.NewRequest("GET", tc.path, nil)
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		res, err := app.Test(req)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Header.Get("Cache-Control"); got != tc.cache {
			t.Errorf("%s: Cache-Control %q, want %q", tc.path, got, tc.cache)
		}
		if got := strings.Contains(res.Header.Get("Vary"), "Origin"); got != tc.vary {
			t.Errorf("%s: Vary %q, want Origin in it: %v", tc.path, res.Header.Get("Vary"), tc.vary)
		}
	}
}
