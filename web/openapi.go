package web

import (
	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/docs"
)

// openAPI serves the OpenAPI 3 description of this API (docs/openapi.yaml) as JSON.
func (s *Server) openAPI(c *fiber.Ctx) error {
	b, err := docs.OpenAPIJSON()
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	return c.Send(b)
}
