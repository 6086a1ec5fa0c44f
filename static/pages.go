package static

// The page data types below are the contract between the page templates and
// the code that executes them. The web package may use them as they are or
// pass its own values with the same field names (a struct or a map): the
// templates only read the fields listed here.

// IndexPage is the data of the "index" template: the list of queues.
type IndexPage struct {
	Lang   string            // "en" or "ko", from Lang
	T      map[string]string // Catalog.Messages(Lang) (BuyerMessages on the buyer pages)
	Queues []QueueInfo
	// The page of the list (GET /?page=N, from 1) and the number of pages; PageLabel is
	// "Page N of M" in the page's language ("" with one page: no pager); PrevURL and NextURL
	// are "" on the first and the last page.
	Page, Pages      int
	PageLabel        string
	PrevURL, NextURL string
}

// QueueInfo describes one queue on the index page.
type QueueInfo struct {
	Name          string
	Waiting       int64
	RatePerSecond float64
	Paused        bool
	Closed        bool
	// State is the queue's one state, by the join's own precedence (web.IndexState): open,
	// paused, scheduled, sold_out, ended or closed (its data-state). Empty: derived from
	// Paused and Closed (open, paused or closed).
	State string
	// StartsAt is a scheduled queue's start, EndsAt a queue's end (RFC 3339 UTC; "" = none).
	StartsAt string
	EndsAt   string
	// Note is a sentence under the name in the page's language: what a demo queue's line is
	// ("" for every other queue).
	Note string
}

// DataState is the entry's data-state: State, or (State empty) closed, paused or open.
func (q QueueInfo) DataState() string {
	switch {
	case q.State != "":
		return q.State
	case q.Closed:
		return "closed"
	case q.Paused:
		return "paused"
	}
	return "open"
}

// Joinable reports whether a join can succeed: the entry offers a join link only then
// (open, paused and scheduled queues; a paused or scheduled queue keeps the place).
func (q QueueInfo) Joinable() bool {
	switch q.DataState() {
	case "open", "paused", "scheduled":
		return true
	}
	return false
}

// QueuePage is the data of the "queue" template, the waiting page
// /q/{queue}. With Exists false or Closed true the page explains why the line
// cannot be joined and its script does not join.
type QueuePage struct {
	Lang   string
	T      map[string]string
	Queue  string
	Exists bool
	Closed bool
	// Email: e-mail reminders are configured; the page offers the address field.
	Email bool
	// ReturnTo is the checked return_to of the redirect flow: at admission the page sends
	// the buyer there with the token in the fragment (#wr_token=…). BadReturnTo: a
	// return_to was given and refused; the page says so and joins nothing.
	ReturnTo    string
	BadReturnTo bool
	// AutoRedirect is the queue's auto_redirect setting: at admission the page goes to the
	// order page (or ReturnTo) by itself.
	AutoRedirect bool
	// Brand is the queue's branding (the "brandbar" and "brandcss" templates).
	Brand Brand
	// EndsAt is the queue's ends_at (RFC 3339 UTC, "" = none): the page shows it (#ends-at)
	// and warns when the ETA reaches past it. Ended: the end has passed; the page says so
	// and joins nothing.
	EndsAt string
	Ended  bool
	// Demo is DemoEmpty or DemoCrowd on the waiting page of one of the zero-config demo's
	// queues ("" on every other): the page says what the line is. DemoSwitch is the other
	// demo queue's waiting page ("" when it does not exist).
	Demo       string
	DemoSwitch string
	// Pow: the queue asks for a proof of work, which only a script can solve; the page's
	// <noscript> part says that scripts are needed and offers no join form.
	Pow bool
	// Invite is the ?invite= code of the address (at most 128 bytes), carried by the
	// <noscript> join form ("" = none).
	Invite string
}

// The zero-config demo's lines (QueuePage.Demo).
const (
	DemoEmpty = "empty" // nobody waits: a visitor goes straight in
	DemoCrowd = "crowd" // a simulated crowd waits ahead of the visitor
)

// Brand is a queue's branding as its pages show it; every field may be empty (none). The
// texts are plain text (the templates escape them); Color was checked to be #rrggbb and
// reaches the page only through CSSURL, a stylesheet of this origin (the CSP forbids inline
// styles); SupportURL is https:// or a same-origin path; LogoURL names the logo with its
// ETag.
type Brand struct {
	Name       string
	Color      string
	Message    string
	SupportURL string
	LogoURL    string
	CSSURL     string
}

// OrderPage is the data of the "order" template, /q/{queue}/order: the page of
// one queue, which offers only what that queue sells. State is what it shows:
//   - OrderReady: Products (one or more; a chooser when several) and the buy
//     form, ProductID the chosen one;
//   - OrderNotHere: ?product= named a product this queue does not sell; NotHere
//     says so (and where it is sold, SoldIn), Products are offered as links, no
//     buy button;
//   - OrderEmpty: the queue sells nothing right now;
//   - OrderNoQueue: there is no such queue;
//   - OrderUnavailable: the products could not be read; the script reloads the
//     page once they can.
type OrderPage struct {
	Lang      string
	T         map[string]string
	Queue     string
	State     string
	ProductID string
	Products  []OrderProduct
	NotHere   string // the sentence of OrderNotHere, in the page's language
	SoldIn    string // the queue that sells the asked-for product ("" = none)
	Brand     Brand  // the queue's branding
}

// Chosen is the product of Products whose ID is ProductID: the one the page shows first
// (the zero value when there is none).
func (p OrderPage) Chosen() OrderProduct {
	for _, x := range p.Products {
		if x.ID == p.ProductID {
			return x
		}
	}
	return OrderProduct{}
}

// The states of the order page (its #shop[data-state]).
const (
	OrderReady       = "ready"
	OrderNotHere     = "not_here"
	OrderEmpty       = "empty"
	OrderNoQueue     = "no_queue"
	OrderUnavailable = "unavailable"
)

// OrderProduct is one product the order page offers. The JSON names are those of
// GET /api/products (the script reads the list from the page and refreshes it
// from GET /api/products?queue=); PriceText and Caps are the texts shown before
// the script formats them in the page's language.
type OrderProduct struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Price          int64  `json:"price"`
	Currency       string `json:"currency"`
	CurrencyDigits int    `json:"currency_digits"`
	Stock          int64  `json:"stock"`
	MaxPerOrder    int    `json:"max_per_order"`
	MaxPerTicket   int    `json:"max_per_ticket"`
	PriceText      string `json:"-"`
	StockText      string `json:"-"`
	Caps           string `json:"-"`
}

// AdminPage is the data of the "admin" template, /admin. The page holds no
// secret: it asks for the admin token and talks to /admin/api itself.
type AdminPage struct {
	Lang string
	T    map[string]string
	// Settings are the fields of a queue card's settings form, generated from the queue
	// settings table (web fills them in).
	Settings []SettingField
}

// SettingField is one field of the dashboard's generated queue settings form.
type SettingField struct {
	Name     string // the control's name: the admin API key
	Input    string // "number", "select", "checkbox" or "list" (a textarea of one value per line)
	LabelKey string // message key of the label (data-i18n)
	Label    string
	Hint     string // "" none
	Min, Max string // number: the input's bounds ("" none)
	Step     string
	TestID   string
	Wide     bool // the field takes the form's whole width
	AutoOnly bool // shown in the auto rate mode only
	Options  []SettingOption
}

// SettingOption is one choice of a select field.
type SettingOption struct {
	Value, LabelKey, Label string
}

// ReportPage is the data of the "report" template, /admin/queues/{queue}/report: the
// printable report of a queue. Like the dashboard it holds no secret; its script reads the
// report with the admin token kept in sessionStorage. Exists false: no such queue (the page
// says so and reads nothing).
type ReportPage struct {
	Lang   string
	T      map[string]string
	Queue  string
	Exists bool
}

// PlacePage is the data of the "place" template, /q/{queue}/place: the waiting page
// without scripts, rendered by the server from the ticket cookie and refreshed by
// the answer's Refresh header every Refresh seconds (0: no refresh). State is what it shows
// (one of the Place… constants); the texts are already formatted in the page's language.
type PlacePage struct {
	Lang  string
	T     map[string]string
	Queue string // "" for a malformed queue name
	Brand Brand
	State string
	// Reason is the refusal's code (the JSON API's error code) on PlaceRefused: which
	// sentence the page shows.
	Reason  string
	Refresh int
	// CanJoin: the page offers the join form (POST /q/{queue}/join); Invite goes with it.
	CanJoin bool
	Invite  string
	// The place (PlaceWaiting, PlaceLottery, PlacePrequeue): its number in line, the people
	// ahead, the ETA, the line's size, the pre-queue's start (RFC 3339 UTC in StartsAtISO,
	// and in words in StartsAt), whether admission is paused or the queue sold out.
	Position, Ahead, ETA, Waiting string
	StartsAt, StartsAtISO         string
	Paused, SoldOut               bool
	// The turn (PlaceAdmitted): until when (UTC, in words and RFC 3339) and how many
	// minutes are left.
	Until, UntilISO, MinutesLeft string
	// RefreshNote says how often the page refreshes and how long a silent place lives.
	RefreshNote string
}

// The states of the no-script waiting page (PlacePage.State, its #place[data-state]).
const (
	PlaceWaiting   = "waiting"     // a place in line, with its number
	PlaceLottery   = "lottery"     // a place in a random queue's line: no number
	PlacePrequeue  = "prequeue"    // before a scheduled start: in the draw
	PlaceAdmitted  = "admitted"    // the turn: a link to the order page
	PlaceExpired   = "expired"     // the turn ran out unused
	PlaceUsed      = "used"        // the turn bought something
	PlaceNone      = "none"        // no ticket for this queue in this browser
	PlaceGone      = "gone"        // the ticket has no place any more: left, or abandoned
	PlaceLeft      = "left"        // the buyer left with the page's leave form
	PlaceRefused   = "refused"     // the queue refuses (Reason: not found, closed, ended, sold out, …)
	PlacePow       = "pow"         // the queue needs a proof of work: scripts are needed
	PlaceCrossSite = "cross_site"  // a join posted by another site's page, refused
	PlaceBusy      = "busy"        // a rate limit refused; the page tries again by itself
	PlaceDown      = "unavailable" // the waiting room could not answer; tried again by itself
)
