package web

import (
	"bytes"
	"errors"
	"net/http"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"

	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/static"
)

// csp allows only this origin's scripts and styles: no inline script anywhere.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'self'; object-src 'none'"

func securityHeaders(c *fiber.Ctx) error {
	c.Set("Content-Security-Policy", csp)
	c.Set("X-Content-Type-Options", "nosniff")
	c.Set("Referrer-Policy", "no-referrer")
	c.Set("X-Frame-Options", "SAMEORIGIN")
	c.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	return c.Next()
}

func (s *Server) pageRoutes() {
	s.app.Use("/static", securityHeaders, staticAsset, filesystem.New(filesystem.Config{Root: http.FS(static.Assets())}))
	pages := s.app.Group("", securityHeaders)
	pages.Get("/", s.indexPage)
	pages.Get("/q/:queue", s.queuePage)
	pages.Get("/q/:queue/order", s.orderPage)
	pages.Post("/q/:queue/join", s.formJoin) // the no-script join and leave (nojs.go)
	pages.Post("/q/:queue/leave", s.formLeave)
	pages.Get("/q/:queue/place", s.placePage)
	pages.Get("/q/:queue/logo", s.logo)
	pages.Get("/q/:queue/brand.css", s.brandCSS)
	pages.Get("/q/:queue/back/:code", s.backPage) // a reminder's link (notify.go)
	pages.Post("/q/:queue/back/:code", s.spendBack)
	pages.Get("/admin", s.adminPage)
	pages.Get("/admin/queues/:queue/report", s.reportPage)
}

// staticAsset serves the content-hashed names the pages use (/static/queue.<hash>.js, see
// static.AssetURL) as the file they name, cached for a year: the name changes with the
// content. A hashed name of another release answers 404 — a page never runs another
// release's script (deploy/nginx.conf lets the proxy try the next instance). Plain names
// (/static/waitroom.js, which shops embed) are cached for five minutes.
func staticAsset(c *fiber.Ctx) error {
	name := strings.TrimPrefix(c.Path(), "/static/")
	if !static.LooksHashed(name) {
		c.Set(fiber.HeaderCacheControl, "public, max-age=300")
		return c.Next()
	}
	plain, ok := static.HashedAsset(name)
	if !ok {
		c.Set(fiber.HeaderCacheControl, "no-store")
		return c.Status(fiber.StatusNotFound).SendString("this asset belongs to another release\n")
	}
	c.Set(fiber.HeaderCacheControl, "public, max-age=31536000, immutable")
	c.Path("/static/" + plain)
	return c.Next()
}

func (s *Server) render(c *fiber.Ctx, status int, name string, data any) error {
	var buf bytes.Buffer
	if err := s.pages.ExecuteTemplate(&buf, name, data); err != nil {
		return err
	}
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Status(status).Send(buf.Bytes())
}

// langCookie remembers the language chosen with the footer's switcher.
const langCookie = "wr_lang"

// lang picks the page language from the server's catalogue: ?lang=xx (one of its
// Languages; it is then remembered in the wr_lang cookie for a year), else the wr_lang
// cookie, else Accept-Language. The cookie is not a secret (not HttpOnly, not
// Secure-only). The messages are the page's: the dashboard and its report (under
// /admin) get every message, the buyer pages only the buyer messages (BuyerMessages).
func (s *Server) lang(c *fiber.Ctx) (string, map[string]string) {
	c.Vary(fiber.HeaderAcceptLanguage, fiber.HeaderCookie)
	cat := s.messages
	l := s.chosenLang(c)
	if strings.HasPrefix(c.Path(), "/admin") {
		// The dashboard and the report are in en, ko and ja; a buyer language without
		// them shows these pages in English (lang="en", so they are read as English).
		l = cat.DashboardLang(l)
		return l, cat.Messages(l)
	}
	return l, cat.BuyerMessages(l)
}

// chosenLang is the language of ?lang= (then remembered in the cookie), the cookie's, or
// Accept-Language's.
func (s *Server) chosenLang(c *fiber.Ctx) string {
	cat := s.messages
	if l, ok := cat.Supported(c.Query("lang")); ok {
		c.Cookie(&fiber.Cookie{Name: langCookie, Value: l, Path: "/", MaxAge: 365 * 24 * 3600, SameSite: "Lax"})
		return l
	}
	if l, ok := cat.Supported(c.Cookies(langCookie)); ok {
		return l
	}
	return cat.Lang(c.Get(fiber.HeaderAcceptLanguage))
}

func (s *Server) queuePage(c *fiber.Ctx) error {
	l, t := s.lang(c)
	name := c.Params("queue")
	data := static.QueuePage{Lang: l, T: t, Queue: name}
	status := 200
	st, err := s.d.Settings.Settings(c.UserContext(), name)
	switch {
	case errors.Is(err, queue.ErrQueueNotFound):
		status = 404
		if !queue.ValidName(name) {
			data.Queue = ""
		}
	case err != nil:
		return err
	default:
		data.Exists, data.Closed, data.AutoRedirect = true, st.Closed, st.AutoRedirect
		data.Email = s.d.Reminders != nil
		data.Brand = s.pageBrand(c.UserContext(), st)
		data.T = s.messages.Overridden(data.T, l, st.Messages)
		data.EndsAt, data.Ended = pageEnd(st)
		data.Pow = st.PowDifficulty > 0
		if inv := c.Query("invite"); len(inv) <= maxInvite {
			data.Invite = inv
		}
		s.demoPage(c.UserContext(), name, &data)
	}
	if raw := c.Query("return_to"); raw != "" && data.Exists {
		var ok bool
		if data.ReturnTo, ok = returnTarget(raw, st.AllowedOrigins); !ok {
			// Never followed: a clear page, no join.
			data.ReturnTo, data.BadReturnTo, status = "", true, 400
		}
	}
	if data.Exists && !data.BadReturnTo {
		if done, err := s.ownPage(c, data, st); done || err != nil {
			return err
		}
	}
	return s.render(c, status, "queue", data)
}

func (s *Server) adminPage(c *fiber.Ctx) error {
	l, t := s.lang(c)
	return s.render(c, 200, "admin", static.AdminPage{Lang: l, T: t, Settings: SettingsForm(t)})
}

// reportPage serves the printable report of a queue; its script reads the report JSON
// with the admin token. An unknown queue answers 404 with a page that says so.
func (s *Server) reportPage(c *fiber.Ctx) error {
	l, t := s.lang(c)
	name := c.Params("queue")
	data := static.ReportPage{Lang: l, T: t, Queue: name}
	if !queue.ValidName(name) {
		data.Queue = ""
		return s.render(c, 404, "report", data)
	}
	_, err := s.d.Settings.Settings(c.UserContext(), name)
	switch {
	case errors.Is(err, queue.ErrQueueNotFound):
		return s.render(c, 404, "report", data)
	case err != nil:
		return err
	}
	data.Exists = true
	return s.render(c, 200, "report", data)
}
