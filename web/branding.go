package web

import (
	"context"
	"errors"
	"io/fs"
	"mime"
	"net/url"
	"regexp"
	"strconv"
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/branding"
	"github.com/waitroom/waitroom/queue"
	"github.com/waitroom/waitroom/static"
)

// Branding of the waiting and order pages. The values are checked by the
// queue package (plain text, a hex colour, an https or same-origin link); here the colour's
// contrast is checked against the page it is drawn on, the logo is taken in and served,
// and the colour reaches the pages as a generated stylesheet (the CSP forbids inline
// styles; the colour is validated hex, so the stylesheet cannot carry anything else).

// logoOf is the URL of a queue's logo (nil: none). A failed read shows no logo rather
// than failing the whole answer.
func (s *Server) logoOf(ctx context.Context, name string) *string {
	if etag, err := s.d.Logos.LogoETag(ctx, name); err == nil && etag != "" {
		u := logoURL(name, etag)
		return &u
	}
	return nil
}

// logoURL names the logo with its ETag, so a new logo is a new URL (no stale cache).
func logoURL(name, etag string) string {
	return "/q/" + name + "/logo?v=" + url.QueryEscape(trimETag(etag))
}

func trimETag(etag string) string {
	if len(etag) >= 2 && etag[0] == '"' && etag[len(etag)-1] == '"' {
		return etag[1 : len(etag)-1]
	}
	return etag
}

// checkBrandColor refuses a brand colour that does not stand out: white text on it (the
// buttons) and it on the page's background (links, highlights) must both reach WCAG AA's
// 4.5:1.
func checkBrandColor(c *string) error {
	if c == nil || *c == "" {
		return nil
	}
	bg := pageBackground()
	onWhite, onPage := branding.ContrastRatio(*c, "#ffffff"), branding.ContrastRatio(*c, bg)
	if onWhite == 0 {
		return &Error{Status: 422, Code: "invalid_settings", Field: "brand_color",
			Message: "brand_color must be a colour like #1a5fb4 (# and six hex digits)."}
	}
	if onWhite < branding.MinContrast || onPage < branding.MinContrast {
		return &Error{Status: 422, Code: "invalid_settings", Field: "brand_color",
			Message: "brand_color " + *c + " is too light: white text on it is " + ratio(onWhite) + ":1 and it on the page (" + bg + ") is " +
				ratio(onPage) + ":1; both must be at least 4.5:1. Pick a darker colour."}
	}
	return nil
}

func ratio(r float64) string { return strconv.FormatFloat(r, 'f', 2, 64) }

var (
	bgOnce  sync.Once
	bgColor = "#ffffff"
	bgVar   = regexp.MustCompile(`--bg:\s*(#[0-9a-fA-F]{6})\s*;`)
)

// pageBackground is the pages' (light) background colour, read once from the stylesheet's
// first --bg so the contrast check follows a change of the design; white if none is found.
func pageBackground() string {
	bgOnce.Do(func() {
		css, err := fs.ReadFile(static.Assets(), "style.css")
		if err != nil {
			return
		}
		if m := bgVar.FindSubmatch(css); m != nil {
			bgColor = string(m[1])
		}
	})
	return bgColor
}

// putLogo stores the request body as the queue's logo: Content-Type image/png, image/jpeg or
// image/webp (else 415), bytes of that type (else 422 field logo), at most branding.MaxLogoBytes
// (100 KiB, 102,400 bytes: the contract's 100 KB); one byte more is 413 body_too_large.
func (s *Server) putLogo(c *fiber.Ctx) error {
	name := c.Params("queue")
	if !queue.ValidName(name) {
		return errorf(404, "queue_not_found", "Queue names are 1-64 characters of A-Z a-z 0-9 _ -.")
	}
	mt, _, _ := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	switch mt {
	case branding.LogoPNG, branding.LogoJPEG, branding.LogoWebP:
	default:
		return errorf(415, "unsupported_media_type", "The logo must be sent as image/png, image/jpeg or image/webp.")
	}
	body := c.Body()
	if len(body) > branding.MaxLogoBytes {
		return errLogoTooLarge()
	}
	l, err := s.d.Logos.PutLogo(c.UserContext(), name, mt, append([]byte(nil), body...))
	if errors.Is(err, queue.ErrInvalid) {
		return invalidError("invalid_logo", err)
	}
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"logo_url": logoURL(name, l.ETag), "type": l.Type, "bytes": len(l.Data)})
}

// deleteLogo removes the queue's logo (204; 404 logo_not_found when it had none).
func (s *Server) deleteLogo(c *fiber.Ctx) error {
	name := c.Params("queue")
	if _, err := s.d.Settings.Settings(c.UserContext(), name); err != nil {
		return err
	}
	had, err := s.d.Logos.DeleteLogo(c.UserContext(), name)
	if err != nil {
		return err
	}
	if !had {
		return errorf(404, "logo_not_found", "This queue has no logo.")
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// logo serves the queue's logo from the room's own origin with its stored type, nosniff
// (the type was checked against the bytes) and an ETag; revalidated every time, since the
// pages name it with ?v=<etag> anyway.
func (s *Server) logo(c *fiber.Ctx) error {
	l, err := s.d.Logos.Logo(c.UserContext(), c.Params("queue"))
	if errors.Is(err, branding.ErrLogoNotFound) {
		return errorf(404, "logo_not_found", "This queue has no logo.")
	}
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderETag, l.ETag)
	c.Set(fiber.HeaderCacheControl, "public, max-age=300, must-revalidate")
	if match := c.Get(fiber.HeaderIfNoneMatch); match != "" && (match == l.ETag || match == "W/"+l.ETag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, l.Type)
	return c.Send(l.Data)
}

// pageBrand is the branding a page shows (the zero value when the queue has none).
func (s *Server) pageBrand(ctx context.Context, st queue.Settings) static.Brand {
	b := static.Brand{Name: st.BrandName, Color: st.BrandColor, Message: st.BrandMessage, SupportURL: st.SupportURL}
	if etag, err := s.d.Logos.LogoETag(ctx, st.Name); err == nil && etag != "" {
		b.LogoURL = logoURL(st.Name, etag)
	}
	if b.Color != "" {
		b.CSSURL = "/q/" + st.Name + "/brand.css?v=" + b.Color[1:]
	}
	return b
}

// brandCSS is the queue's accent colour as a stylesheet the pages link (the CSP allows
// styles from this origin only). Without a colour it is empty. The colour was checked to be
// #rrggbb when stored; it is checked again here, so nothing else can reach the CSS.
func (s *Server) brandCSS(c *fiber.Ctx) error {
	st, err := s.d.Settings.Settings(c.UserContext(), c.Params("queue"))
	if err != nil && !errors.Is(err, queue.ErrQueueNotFound) {
		return err
	}
	c.Set(fiber.HeaderContentType, "text/css; charset=utf-8")
	c.Set(fiber.HeaderCacheControl, "public, max-age=300")
	if branding.ContrastRatio(st.BrandColor, "#ffffff") == 0 {
		return c.SendString("/* no brand colour */\n")
	}
	col := st.BrandColor
	// On the light page the colour replaces the design's primary (buttons, links, the
	// position and other highlights, focus rings): its contrast with white text and with the
	// page was checked. On the dark page only the buttons take it (white text on it was
	// checked; as text on a dark background it was not).
	return c.SendString(`.branded { --brand: ` + col + `; }
@media (prefers-color-scheme: light) {
  body.branded { --primary: ` + col + `; --primary-hover: ` + col + `; --on-primary: #ffffff; --focus: ` + col + `; }
  .branded .brand-name { color: var(--brand); }
}
.branded .button-primary, .branded button.button-primary, .branded a.button-primary { background: var(--brand); border-color: var(--brand); color: #ffffff; }
.branded .button-primary:hover, .branded a.button-primary:hover { background: var(--brand); border-color: var(--brand); color: #ffffff; filter: brightness(0.88); }
.branded .brand-bar { border-top-color: var(--brand); }
`)
}
