package web

import "github.com/gofiber/fiber/v2"

// challenge answers POST /api/queues/{queue}/challenge (being written).
func (s *Server) challenge(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "Not implemented yet.")
}
