// Package shop is an example shop on another site than the waiting room, for both ways of
// putting the room in front of it (examples/shop/README.md; README, "Put it in front of
// your shop"):
//
//   - the redirect flow (redirect.html): the buyer goes to the room's page with
//     ?return_to=, comes back with the signed token in the fragment (#wr_token=…), and this
//     backend verifies it offline with the room's JWKS and redeems it once (POST
//     /api/redeem) before opening its own session, in which the buyer places the shop's own
//     order;
//   - the embedded widget (embed.html): the room's /static/waitroom.js on this page joins,
//     streams and orders the room's product across origins (CORS; the ticket travels as a
//     Bearer token), so the order is the room's.
//
// The pages are templates without a build step; the handler fills in the room's address,
// the queue and the product. The backend uses no code of the waiting room: only its public
// JWKS and redeem endpoint, as a PHP or Node backend would.
package shop

import (
	"crypto/ed25519"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

//go:embed static
var files embed.FS

var pages = template.Must(template.ParseFS(files, "static/*.html"))

// Config configures the example shop.
type Config struct {
	Room    string       // the waiting room's base URL, e.g. https://line.shop.example
	Queue   string       // the queue in front of the shop
	Product string       // the room's product the embedded widget orders (the redirect flow's shop order names it too)
	Issuer  string       // the room's token issuer (WR_ISSUER; default "waitroom")
	Client  *http.Client // for the JWKS and redeem calls (default: 5 s timeout)
}

// Shop is the example shop's handler.
type Shop struct {
	cfg  Config
	room string // the room's origin, for the pages' Content-Security-Policy

	mu       sync.Mutex
	keys     map[string]ed25519.PublicKey
	fetched  time.Time
	sessions map[string]*session // session id -> session
}

var (
	queueName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	productID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

// New returns the shop, or an error naming the setting that is wrong.
func New(cfg Config) (*Shop, error) {
	cfg.Room = strings.TrimRight(cfg.Room, "/")
	u, err := url.Parse(cfg.Room)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.Fragment != "" || u.Path != "" {
		return nil, fmt.Errorf("room %q: want the room's base URL, http(s)://host[:port] without a path", cfg.Room)
	}
	if !queueName.MatchString(cfg.Queue) {
		return nil, fmt.Errorf("queue %q: want 1-64 characters from A-Z a-z 0-9 _ -", cfg.Queue)
	}
	if !productID.MatchString(cfg.Product) {
		return nil, fmt.Errorf("product %q: want a product id (1-64 characters from A-Z a-z 0-9 _ . -)", cfg.Product)
	}
	if cfg.Issuer == "" {
		cfg.Issuer = "waitroom"
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 5 * time.Second}
	}
	return &Shop{cfg: cfg, room: u.Scheme + "://" + u.Host, sessions: map[string]*session{}}, nil
}

func (s *Shop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case p == "/shop/api/admit":
		only(w, r, http.MethodPost, s.admit)
	case p == "/shop/api/session":
		only(w, r, http.MethodGet, s.session)
	case p == "/shop/api/orders":
		only(w, r, http.MethodPost, s.order)
	case p == "/favicon.ico":
		w.WriteHeader(http.StatusNoContent)
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	case p == "/" || p == "/index.html":
		s.page(w, "index.html")
	case p == "/redirect.html" || p == "/embed.html":
		s.page(w, p[1:])
	case p == "/shop.css" || p == "/redirect.js" || p == "/embed.js":
		s.asset(w, p[1:])
	default:
		http.NotFound(w, r)
	}
}

func only(w http.ResponseWriter, r *http.Request, method string, h http.HandlerFunc) {
	if r.Method != method {
		w.Header().Set("Allow", method)
		reply(w, http.StatusMethodNotAllowed, errorJSON{Error: "use " + method})
		return
	}
	h(w, r)
}

// page renders a page with the room's address, queue and product, under a CSP that names
// exactly what the integration needs: the room's script and the room's API.
func (s *Shop) page(w http.ResponseWriter, name string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer") // the return address's fragment never leaves anyway
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self' "+s.room+"; connect-src 'self' "+s.room+
		"; img-src 'self' data:; style-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	data := map[string]string{"Room": s.cfg.Room, "Queue": s.cfg.Queue, "Product": s.cfg.Product}
	if err := pages.ExecuteTemplate(w, name, data); err != nil {
		http.Error(w, "page: "+err.Error(), http.StatusInternalServerError)
	}
}

func (s *Shop) asset(w http.ResponseWriter, name string) {
	b, err := files.ReadFile("static/" + name)
	if err != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	ct := "text/css; charset=utf-8"
	if strings.HasSuffix(name, ".js") {
		ct = "text/javascript; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}
