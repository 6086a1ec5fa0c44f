package web

import "github.com/gofiber/fiber/v2"

// history answers GET /admin/api/queues/{queue}/history (analytics). Not built yet.
func (s *Server) history(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "History is not built yet.")
}

// report answers GET /admin/api/queues/{queue}/report (analytics). Not built yet.
func (s *Server) report(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "Reports are not built yet.")
}
