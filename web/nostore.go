package web

import (
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Caching (API.md, "Caching"). Every answer is Cache-Control: no-store unless its handler
// says it may be cached: answers carry tickets, admission tokens, invite codes and admin
// data, and a route added later is covered without anyone remembering it. The answers that
// may be cached say so themselves: the content-hashed static assets, the JWKS, the OpenAPI
// document, a done draw's order, a queue's logo and brand stylesheet. An error answer is
// never cached (handleError sets no-store again, over whatever the handler had set).

// noStore is the default: no cache keeps the answer. On the routes open to other origins
// (cors.go) the answer depends on the request's Origin, whether or not this request sent
// one, so it also varies by Origin: a cache must not hand one origin's answer to another.
func noStore(c *fiber.Ctx) error {
	c.Set(fiber.HeaderCacheControl, "no-store")
	if _, ok := corsRouteOf(c.Path()); ok {
		c.Vary(fiber.HeaderOrigin)
	}
	return c.Next()
}

// jwksCache sends the JWKS with the configured lifetime (Config.JWKSMaxAge): a verifier
// may keep it that long, so WR_KEY_PUBLISH_DELAY must cover it (server/config.go).
func (s *Server) jwksCache(c *fiber.Ctx) error {
	if err := c.Next(); err != nil {
		return err
	}
	if c.Response().StatusCode() == fiber.StatusOK {
		c.Set(fiber.HeaderCacheControl, "public, max-age="+strconv.Itoa(int(s.cfg.JWKSMaxAge/time.Second)))
	}
	return nil
}

// notModified answers a GET or HEAD 304 when the answer has an ETag that the request's
// If-None-Match matches (etagMatches), whichever handler made it: the handler's headers
// (ETag, Cache-Control, Vary) stay, the body goes.
func notModified(c *fiber.Ctx) error {
	if err := c.Next(); err != nil {
		return err
	}
	if m := c.Method(); m != fiber.MethodGet && m != fiber.MethodHead {
		return nil
	}
	inm := c.Get(fiber.HeaderIfNoneMatch)
	etag := string(c.Response().Header.Peek(fiber.HeaderETag))
	if inm == "" || etag == "" || c.Response().StatusCode() != fiber.StatusOK || !etagMatches(inm, etag) {
		return nil
	}
	c.Response().ResetBody()
	c.Response().Header.Del(fiber.HeaderContentType)
	c.Status(fiber.StatusNotModified)
	return nil
}

// etagMatches evaluates If-None-Match against the current representation's ETag by RFC
// 9110 §13.1.2: "*" matches any current representation; otherwise the field is a list of
// entity-tags compared weakly (W/"x" and "x" are the same tag for GET and HEAD). A
// malformed field matches nothing (the full answer is sent).
func etagMatches(field, etag string) bool {
	cur, ok := opaqueTag(etag)
	if !ok {
		return false
	}
	field = strings.Trim(field, " \t")
	if field == "*" {
		return true
	}
	for field != "" {
		// One list element: [W/]"etagc*", then optional whitespace and a comma.
		field = strings.TrimLeft(field, " \t,")
		if field == "" {
			break
		}
		tag := field
		if strings.HasPrefix(tag, "W/") {
			tag = tag[2:]
		}
		if tag == "" || tag[0] != '"' {
			return false
		}
		end := strings.IndexByte(tag[1:], '"')
		if end < 0 {
			return false
		}
		opaque := tag[:end+2]
		if !validOpaque(opaque) {
			return false
		}
		if opaque == cur {
			return true
		}
		field = strings.TrimLeft(tag[end+2:], " \t")
		if field != "" && field[0] != ',' {
			return false
		}
	}
	return false
}

// opaqueTag is an entity-tag without its weakness indicator.
func opaqueTag(etag string) (string, bool) {
	etag = strings.TrimPrefix(etag, "W/")
	return etag, len(etag) >= 2 && etag[0] == '"' && etag[len(etag)-1] == '"' && validOpaque(etag)
}

// validOpaque reports whether s is "etagc*": %x21 / %x23-7E / obs-text between quotes.
func validOpaque(s string) bool {
	for i := 1; i < len(s)-1; i++ {
		if b := s[i]; b == '"' || b < 0x21 || b == 0x7f {
			return false
		}
	}
	return true
}
