package web

import "github.com/gofiber/fiber/v2"

// Signed tokens at the edges (being written).
func (s *Server) jwks(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "Not implemented yet.")
}
func (s *Server) verify(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "Not implemented yet.")
}
func (s *Server) redeem(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "Not implemented yet.")
}
func (s *Server) listKeys(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "Not implemented yet.")
}
func (s *Server) rotateKeys(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "Not implemented yet.")
}
