package web

import "github.com/gofiber/fiber/v2"

// Invite administration (being written).
func (s *Server) createInvites(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "Not implemented yet.")
}

func (s *Server) listInvites(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "Not implemented yet.")
}

func (s *Server) revokeInvite(c *fiber.Ctx) error {
	return errorf(501, "not_implemented", "Not implemented yet.")
}
