package web

// A queue's own waiting page: the admin API that saves, reads and removes its template
// (package pagetemplate checks it; package branding stores it).

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"mime"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/branding"
	"github.com/waitroom/waitroom/pagetemplate"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/static"
	"github.com/waitroom/waitroom/stream"
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
	if _, err := parsePageTemplate(string(c.Body()), origins); err != nil {
		return err
	}
	p, err := s.d.Logos.PutPage(c.UserContext(), name, string(c.Body()), origins)
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

// ownPage renders the queue's own page for data (a queue that exists, whose page joins) and
// sends it with the CSP that lists its origins. done is false when the queue has none, or
// when it could not be read or rendered: then the caller sends the default page (a failure
// is logged and counted, never shown to the buyer).
func (s *Server) ownPage(c *fiber.Ctx, data static.QueuePage, st queue.Settings) (done bool, err error) {
	ctx := c.UserContext()
	p, err := s.d.Logos.Page(ctx, data.Queue)
	if errors.Is(err, branding.ErrPageNotFound) {
		return false, nil
	}
	if err != nil {
		s.pageFallback(data.Queue, err)
		return false, nil
	}
	out, err := s.renderOwn(ctx, p.Template, data, st, false)
	if errors.Is(err, pagetemplate.ErrRender) {
		s.pageFallback(data.Queue, err)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.Set("Content-Security-Policy", pagetemplate.CSP(p.Origins))
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Set(fiber.HeaderCacheControl, "no-store")
	return true, c.Status(fiber.StatusOK).Send(out)
}

// pageFallback logs and counts a queue's own page that was not shown.
func (s *Server) pageFallback(name string, err error) {
	s.m.pageFallbacks.Inc()
	s.log.Warn().Err(err).Str("queue", name).Msg("page template render failed: the default page was shown")
}

// renderOwn renders tpl with the fields of data: the room's own parts rendered by its
// templates, then the operator's template around them.
// A preview carries no scripts (its frame would not run them anyway).
func (s *Server) renderOwn(ctx context.Context, tpl *pagetemplate.Template, data static.QueuePage, st queue.Settings, preview bool) ([]byte, error) {
	f := pagetemplate.Fields{Lang: data.Lang, Dir: static.Dir(data.Lang), Queue: data.Queue, Brand: data.Brand.Name,
		EndsAt: data.EndsAt, T: data.T}
	if st.StartsAt != nil {
		f.StartsAt = st.StartsAt.UTC().Format(stream.TimeFormat)
	}
	for _, part := range []struct {
		name string
		to   *template.HTML
	}{{"queue_head", &f.Head}, {"queue_room", &f.Room}, {"queue_page_scripts", &f.Scripts}} {
		var buf bytes.Buffer
		if err := s.pages.ExecuteTemplate(&buf, part.name, data); err != nil {
			return nil, err
		}
		*part.to = template.HTML(buf.String()) // the room's own templates, escaped by them
	}
	if preview {
		f.Scripts = "<!-- the page's scripts: not run in a preview -->"
	}
	return tpl.Render(ctx, f)
}

// previewPageTemplate checks the body like putPageTemplate and answers the page it would
// render for this queue now (text/html), saving nothing. The dashboard shows it in a frame
// sandboxed without scripts; the answer's own CSP sandboxes it too.
func (s *Server) previewPageTemplate(c *fiber.Ctx) error {
	name := c.Params("queue")
	st, err := s.d.Settings.Settings(c.UserContext(), name)
	if err != nil {
		return err
	}
	if mt, _, _ := mime.ParseMediaType(c.Get(fiber.HeaderContentType)); mt != fiber.MIMETextHTML {
		return errorf(415, "unsupported_media_type", "Send the template as text/html.")
	}
	origins := strings.Fields(strings.ReplaceAll(c.Get(headerOrigins)+" "+c.Query("origins"), ",", " "))
	tpl, err := parsePageTemplate(string(c.Body()), origins)
	if err != nil {
		return err
	}
	l, t := s.lang(c)
	data := static.QueuePage{Lang: l, T: t, Queue: name, Exists: true, Closed: st.Closed, AutoRedirect: st.AutoRedirect}
	data.Brand = s.pageBrand(c.UserContext(), st)
	data.EndsAt, data.Ended = pageEnd(st)
	out, err := s.renderOwn(c.UserContext(), tpl, data, st, true)
	if errors.Is(err, pagetemplate.ErrRender) {
		return &Error{Status: 422, Code: "invalid_template", Message: err.Error(), Field: "template"}
	}
	if err != nil {
		return err
	}
	c.Set("Content-Security-Policy", "sandbox")
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return c.Send(out)
}

// parsePageTemplate is pagetemplate's check with its refusal as the API's 422.
func parsePageTemplate(src string, origins []string) (*pagetemplate.Template, error) {
	err := pagetemplate.CheckOrigins(origins)
	var tpl *pagetemplate.Template
	if err == nil {
		tpl, err = pagetemplate.Parse(src, origins)
	}
	var te *pagetemplate.Error
	if errors.As(err, &te) {
		return nil, &Error{Status: 422, Code: "invalid_template", Message: te.Error(), Field: "template", Line: te.Line}
	}
	return tpl, err
}
