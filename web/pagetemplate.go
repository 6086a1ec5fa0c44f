package web

// A queue's own waiting page: the admin API that saves, reads and removes its template
// (package pagetemplate checks it; package branding stores it).

import (
	"context"
	"errors"
	"mime"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/branding"
	"github.com/waitroom/waitroom/pagetemplate"
	"github.com/waitroom/waitroom/queue"
)

// headerOrigins carries the origins a template may load from, space-separated: in the PUT
// (or as ?origins=a,b) and in the GET's answer.
const headerOrigins = "X-Template-Origins"

// putPageTemplate saves the body (text/html, at most pagetemplate.MaxSize bytes) as the
// queue's page: 200 {"version","etag","origins","bytes"}; 422 invalid_template with the
// line and the reason; 415 for another content type.
func (s *Server) putPageTemplate(c *fiber.Ctx) error {
	name := c.Params("queue")
	if !queue.ValidName(name) {
		return errorf(404, "queue_not_found", "Queue names are 1-64 characters of A-Z a-z 0-9 _ -.")
	}
	if mt, _, _ := mime.ParseMediaType(c.Get(fiber.HeaderContentType)); mt != fiber.MIMETextHTML {
		return errorf(415, "unsupported_media_type", "Send the template as text/html.")
	}
	origins := strings.Fields(strings.ReplaceAll(c.Get(headerOrigins)+" "+c.Query("origins"), ",", " "))
	p, err := s.d.Logos.PutPage(c.UserContext(), name, string(c.Body()), origins)
	var te *pagetemplate.Error
	if errors.As(err, &te) {
		return &Error{Status: 422, Code: "invalid_template", Message: te.Error(), Field: "template", Line: te.Line}
	}
	if err != nil {
		return err
	}
	return c.JSON(pageJSON(p, len(c.Body())))
}

// getPageTemplate answers the queue's template (text/html; its origins in
// X-Template-Origins, its version in X-Template-Version), or 404 template_not_found.
func (s *Server) getPageTemplate(c *fiber.Ctx) error {
	name := c.Params("queue")
	if _, err := s.d.Settings.Settings(c.UserContext(), name); err != nil {
		return err
	}
	p, err := s.d.Logos.Page(c.UserContext(), name)
	if errors.Is(err, branding.ErrPageNotFound) {
		return errorf(404, "template_not_found", "This queue shows the default page.")
	}
	if err != nil {
		return err
	}
	c.Set(headerOrigins, strings.Join(p.Origins, " "))
	c.Set("X-Template-Version", strconv.FormatInt(p.Version, 10))
	c.Set(fiber.HeaderETag, p.ETag)
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.SendString(p.Template.Source())
}

// deletePageTemplate returns the queue to the default page (204; 404 template_not_found
// when it had none).
func (s *Server) deletePageTemplate(c *fiber.Ctx) error {
	name := c.Params("queue")
	if _, err := s.d.Settings.Settings(c.UserContext(), name); err != nil {
		return err
	}
	had, err := s.d.Logos.DeletePage(c.UserContext(), name)
	if err != nil {
		return err
	}
	if !had {
		return errorf(404, "template_not_found", "This queue shows the default page.")
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func pageJSON(p branding.Page, size int) fiber.Map {
	origins := p.Origins
	if origins == nil {
		origins = []string{}
	}
	return fiber.Map{"version": p.Version, "etag": p.ETag, "origins": origins, "bytes": size}
}

// pageSnapshot is the audit log's view of a queue's page: its version, ETag, origins and
// source (every version's source is kept, so an earlier page can be put back); nil when
// the queue shows the default page.
func (s *Server) pageSnapshot(ctx context.Context, name string) any {
	if !queue.ValidName(name) {
		return nil
	}
	p, err := s.d.Logos.Page(ctx, name)
	if err != nil {
		return fiber.Map{"template": nil}
	}
	m := pageJSON(p, len(p.Template.Source()))
	m["source"] = p.Template.Source()
	return m
}
