package web

import "github.com/gofiber/fiber/v2"

// auditList answers GET /admin/api/audit. Not built yet.
func (s *Server) auditList(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "The audit log is not built yet.")
}
