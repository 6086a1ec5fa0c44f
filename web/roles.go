package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/waitroom/waitroom/orders"
)

// Admin roles: an operator may use every admin route, a viewer only reads (every GET).
const (
	RoleOperator = "operator"
	RoleViewer   = "viewer"
)

// Actors of the two single-token settings (WR_ADMIN_TOKEN, WR_ADMIN_VIEWER_TOKEN).
const (
	ActorAdmin  = "admin"
	ActorViewer = "viewer"
)

// MinAdminTokenLen is the shortest viewer or named admin token accepted.
const MinAdminTokenLen = 16

// AdminToken is one bearer token of the admin API: who it is (Name, the audit log's actor)
// and what it may do (Role).
type AdminToken struct {
	Name  string
	Role  string
	Token string
}

// Locals keys of the authenticated admin request.
const (
	localActor = "wr_admin_actor"
	localRole  = "wr_admin_role"
)

// ParseAdminTokens reads WR_ADMIN_TOKENS: comma-separated name:role:token entries (names
// 1-32 of A-Z a-z 0-9 _ -, role operator or viewer, tokens at least MinAdminTokenLen
// characters; the token may contain colons). An error names the entry by its position and
// never holds a token.
func ParseAdminTokens(v string) ([]AdminToken, error) {
	var out []AdminToken
	for i, e := range strings.Split(v, ",") {
		e = strings.TrimSpace(e)
		n := i + 1
		parts := strings.SplitN(e, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("entry %d: must be name:role:token", n)
		}
		t := AdminToken{Name: parts[0], Role: parts[1], Token: parts[2]}
		if !validActor(t.Name) {
			return nil, fmt.Errorf("entry %d: the name must be 1-32 characters of A-Z a-z 0-9 _ -", n)
		}
		if t.Role != RoleOperator && t.Role != RoleViewer {
			return nil, fmt.Errorf("entry %d (%s): the role must be operator or viewer", n, t.Name)
		}
		if len(t.Token) < MinAdminTokenLen || strings.TrimSpace(t.Token) != t.Token {
			return nil, fmt.Errorf("entry %d (%s): the token must be at least %d characters, without spaces around it", n, t.Name, MinAdminTokenLen)
		}
		out = append(out, t)
	}
	return out, nil
}

// CheckAdminTokens refuses a set of admin tokens where two share a token or a name. admin
// (WR_ADMIN_TOKEN, actor "admin") and viewer (WR_ADMIN_VIEWER_TOKEN, actor "viewer") may
// be empty; the named tokens may not take their actor names.
func CheckAdminTokens(admin, viewer string, named []AdminToken) error {
	names := map[string]string{ActorAdmin: "WR_ADMIN_TOKEN", ActorViewer: "WR_ADMIN_VIEWER_TOKEN"}
	tokens := map[string]string{}
	if admin != "" {
		tokens[admin] = "WR_ADMIN_TOKEN"
	}
	if viewer != "" {
		if _, dup := tokens[viewer]; dup {
			return fmt.Errorf("WR_ADMIN_VIEWER_TOKEN is the same token as WR_ADMIN_TOKEN")
		}
		tokens[viewer] = "WR_ADMIN_VIEWER_TOKEN"
	}
	for i, t := range named {
		where := fmt.Sprintf("WR_ADMIN_TOKENS entry %d (%s)", i+1, t.Name)
		if other, dup := names[t.Name]; dup {
			return fmt.Errorf("%s: the name %q is taken by %s", where, t.Name, other)
		}
		names[t.Name] = where
		if other, dup := tokens[t.Token]; dup {
			return fmt.Errorf("%s: the same token as %s", where, other)
		}
		tokens[t.Token] = where
	}
	return nil
}

// validActor: 1-32 of A-Z a-z 0-9 _ -.
func validActor(s string) bool {
	if len(s) < 1 || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// adminTokens is every configured admin token: WR_ADMIN_TOKEN (operator "admin") first,
// then Config.AdminTokens.
func (s *Server) adminTokens() []AdminToken {
	out := make([]AdminToken, 0, 1+len(s.cfg.AdminTokens))
	if s.cfg.AdminToken != "" {
		out = append(out, AdminToken{Name: ActorAdmin, Role: RoleOperator, Token: s.cfg.AdminToken})
	}
	return append(out, s.cfg.AdminTokens...)
}

// adminAuth requires Authorization: Bearer <an admin token>. Tokens are compared in
// constant time (both sides hashed first so not even the length leaks), against every
// configured token without stopping at a match. The actor and role go to Locals
// (adminActor, adminRole); a viewer's PUT, POST or DELETE is refused with 403 forbidden
// here, before any handler or audit snapshot runs.
func (s *Server) adminAuth(c *fiber.Ctx) error {
	all := s.adminTokens()
	if len(all) == 0 {
		return errorf(401, "admin_disabled", "The admin API is disabled: set WR_ADMIN_TOKEN.")
	}
	a := c.Get(fiber.HeaderAuthorization)
	if len(a) < 7 || !strings.EqualFold(a[:7], "bearer ") {
		return errorf(401, "admin_unauthorized", "Admin bearer token required.")
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(a[7:])))
	match := -1
	for i, t := range all {
		want := sha256.Sum256([]byte(t.Token))
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return errorf(401, "admin_unauthorized", "Wrong admin bearer token.")
	}
	who := all[match]
	c.Locals(localActor, who.Name)
	c.Locals(localRole, who.Role)
	if who.Role != RoleOperator {
		switch c.Method() {
		case fiber.MethodGet, fiber.MethodHead, fiber.MethodOptions:
		default:
			return errorf(403, "forbidden", "This admin token may only read (role viewer).")
		}
	}
	return c.Next()
}

// adminActor is the authenticated admin's name ("" outside the admin API).
func adminActor(c *fiber.Ctx) string {
	v, _ := c.Locals(localActor).(string)
	return v
}

// adminRole is the authenticated admin's role ("" outside the admin API).
func adminRole(c *fiber.Ctx) string {
	v, _ := c.Locals(localRole).(string)
	return v
}

// currencyJSON is one code of the currency allow-list with its minor unit (decimals).
type currencyJSON struct {
	Code   string `json:"code"`
	Digits int    `json:"digits"`
}

// whoamiJSON is GET /admin/api/whoami: who the token is, and the currency allow-list the
// dashboard's product form offers (read from orders, so the form never offers a code the
// API refuses nor enters a price with other decimals than the API reads).
type whoamiJSON struct {
	Actor      string         `json:"actor"`
	Role       string         `json:"role"`
	Currencies []currencyJSON `json:"currencies"`
}

// whoami answers GET /admin/api/whoami.
func (s *Server) whoami(c *fiber.Ctx) error {
	out := whoamiJSON{Actor: adminActor(c), Role: adminRole(c)}
	for _, code := range orders.Currencies() {
		d, _ := orders.CurrencyDigits(code)
		out.Currencies = append(out.Currencies, currencyJSON{Code: code, Digits: d})
	}
	return c.JSON(out)
}
