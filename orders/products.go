package orders

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Product is one product. Price is in the minor units of Currency (an ISO 4217 code from
// the allow-list in currency.go: 129000 KRW is ₩129,000, 12900 USD is $129.00). Queue names the waiting-room queue whose
// admission tokens may buy it ("" = not on sale through the order API).
type Product struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Price        int64     `json:"price"`
	Currency     string    `json:"currency"`
	Stock        int       `json:"stock"`
	Queue        string    `json:"queue"`
	MaxPerOrder  int       `json:"max_per_order"`
	MaxPerTicket int       `json:"max_per_ticket"`
	UpdatedAt    time.Time `json:"-"`
	// Judged is set by PutProduct when the change touched stock or the queue: the stock of
	// the queues the product was and is sold through, judged in the change's transaction.
	Judged []QueueStock `json:"-"`
}

// ProductPatch is a partial update: nil fields keep their value, or take the default when
// the product is created (name = id, price 0, DefaultCurrency, stock 0, no queue,
// DefaultMaxPerOrder, DefaultMaxPerTicket). A Queue of "" takes the product off sale.
// Changing Currency does not convert Price: an operator who moves a product from USD to
// KRW sends both.
type ProductPatch struct {
	Name         *string
	Price        *int64
	Currency     *string
	Stock        *int
	Queue        *string
	MaxPerOrder  *int
	MaxPerTicket *int
}

// Limits on input: each is the range the column really holds (or the JSON number a
// browser can read exactly), so a value that passes never fails in PostgreSQL.
const (
	MaxQuantity = 1000
	// MaxPrice is 2^53 − 1: the largest integer a JavaScript client reads exactly (the
	// column is bigint).
	MaxPrice = 1<<53 - 1
	// MaxStock fits the integer column with room for any order quantity.
	MaxStock = 1_000_000_000
	// MaxNameLen is in characters.
	MaxNameLen = 200
	// Per-buyer caps: defaults for a new product (and for the products that existed before
	// the caps did) and their range.
	DefaultMaxPerOrder  = 4
	DefaultMaxPerTicket = 4
	MaxPerBuyer         = MaxQuantity
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidID reports whether id is a valid product id: 1–64 characters from A–Z a–z 0–9 _ -.
// (The web layer answers 404 for an invalid id in a path, 422 in a body.)
func ValidID(id string) bool { return idPattern.MatchString(id) }

const productColumns = "id, name, price, currency, stock, COALESCE(queue, ''), max_per_order, max_per_ticket, updated_at"

func scanProduct(row pgx.Row, extra ...any) (Product, error) {
	var p Product
	err := row.Scan(append([]any{&p.ID, &p.Name, &p.Price, &p.Currency, &p.Stock, &p.Queue, &p.MaxPerOrder, &p.MaxPerTicket, &p.UpdatedAt}, extra...)...)
	return p, err
}

// Products lists every product ordered by id.
func (s *Store) Products(ctx context.Context) ([]Product, error) {
	var out []Product
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		rows, err := c.Query(ctx, "SELECT "+productColumns+" FROM products ORDER BY id")
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Product, error) { return scanProduct(r) })
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("orders: list products: %w", err)
	}
	return out, nil
}

// Product returns one product; ErrNotFound when there is none (also for an invalid id,
// which no product can have).
func (s *Store) Product(ctx context.Context, id string) (Product, error) {
	if !ValidID(id) {
		return Product{}, fmt.Errorf("orders: product %q: %w", id, ErrNotFound)
	}
	var p Product
	err := s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		var err error
		p, err = scanProduct(c.QueryRow(ctx, "SELECT "+productColumns+" FROM products WHERE id = $1", id))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		return err
	})
	if err != nil {
		return Product{}, fmt.Errorf("orders: product %q: %w", id, err)
	}
	return p, nil
}

// Validate refuses a value outside what the products table holds with an *InvalidError
// naming the field; PutProduct calls it.
func (p ProductPatch) Validate() error {
	switch {
	case p.Name != nil && !validName(*p.Name):
		return invalid("name", "name must be 1–%d characters of text (no control characters).", MaxNameLen)
	case p.Price != nil && (*p.Price < 0 || *p.Price > MaxPrice):
		return invalid("price", "price must be between 0 and %d (minor units).", MaxPrice)
	case p.Currency != nil && !ValidCurrency(*p.Currency):
		return invalid("currency", "%s", currencyMessage())
	case p.Stock != nil && (*p.Stock < 0 || *p.Stock > MaxStock):
		return invalid("stock", "stock must be between 0 and %d.", MaxStock)
	case p.Queue != nil && *p.Queue != "" && !ValidID(*p.Queue):
		return invalid("queue", "queue must name a queue (1–64 characters from A–Z a–z 0–9 _ -) or be empty (not on sale).")
	case p.MaxPerOrder != nil && (*p.MaxPerOrder < 1 || *p.MaxPerOrder > MaxPerBuyer):
		return invalid("max_per_order", "max_per_order must be between 1 and %d.", MaxPerBuyer)
	case p.MaxPerTicket != nil && (*p.MaxPerTicket < 1 || *p.MaxPerTicket > MaxPerBuyer):
		return invalid("max_per_ticket", "max_per_ticket must be between 1 and %d.", MaxPerBuyer)
	}
	return nil
}

// validName: 1–MaxNameLen characters of valid UTF-8 with no control characters (a NUL
// cannot be stored in a text column; the others have no business in a product name).
func validName(s string) bool {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxNameLen {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// PutProduct creates the product or updates the fields set in patch, in one statement.
// created reports whether it did not exist before.
func (s *Store) PutProduct(ctx context.Context, id string, patch ProductPatch) (p Product, created bool, err error) {
	if !ValidID(id) {
		return Product{}, false, invalid("id", "Product ids are 1–64 characters from A–Z a–z 0–9 _ -.")
	}
	if err := patch.Validate(); err != nil {
		return Product{}, false, err
	}
	err = s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
			return putProduct(ctx, tx, id, patch, &p, &created)
		})
	})
	if err != nil {
		return Product{}, false, fmt.Errorf("orders: put product %q: %w", id, err)
	}
	return p, created, nil
}

// putProduct writes the product in tx and, when stock or the queue changed, judges the
// stock of the queues it was and is sold through. The product's row is locked first, then
// the queues' rows (judgeQueues), the order PlaceOrder takes them in too.
func putProduct(ctx context.Context, tx pgx.Tx, id string, patch ProductPatch, p *Product, created *bool) error {
	var before string
	if patch.Stock != nil || patch.Queue != nil {
		err := tx.QueryRow(ctx, `SELECT COALESCE(queue, '') FROM products WHERE id = $1 FOR UPDATE`, id).Scan(&before)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	// xmax = 0 on the returned row version means it was inserted, not updated.
	// queue: NULL keeps it, '' clears it (stored as NULL).
	row := tx.QueryRow(ctx, `
			INSERT INTO products AS p (id, name, price, stock, queue, max_per_order, max_per_ticket, currency, updated_at)
			VALUES ($1, COALESCE($2::text, $1), COALESCE($3::bigint, 0), COALESCE($4::integer, 0), NULLIF($5::text, ''),
				COALESCE($6::integer, $8::integer), COALESCE($7::integer, $9::integer), COALESCE($10::text, $11::text), now())
			ON CONFLICT (id) DO UPDATE SET
				name           = COALESCE($2, p.name),
				price          = COALESCE($3, p.price),
				currency       = COALESCE($10, p.currency),
				stock          = COALESCE($4, p.stock),
				queue          = CASE WHEN $5::text IS NULL THEN p.queue ELSE NULLIF($5, '') END,
				max_per_order  = COALESCE($6, p.max_per_order),
				max_per_ticket = COALESCE($7, p.max_per_ticket),
				updated_at     = now()
			RETURNING `+productColumns+`, (xmax = 0)`,
		id, patch.Name, patch.Price, patch.Stock, patch.Queue, patch.MaxPerOrder, patch.MaxPerTicket,
		DefaultMaxPerOrder, DefaultMaxPerTicket, patch.Currency, DefaultCurrency)
	var err error
	if *p, err = scanProduct(row, created); err != nil {
		return err
	}
	if patch.Stock == nil && patch.Queue == nil {
		return nil
	}
	p.Judged, err = judgeQueues(ctx, tx, before, p.Queue)
	return err
}

// EnsureProduct creates p if no product with its id exists (demo data) and leaves an
// existing one untouched. An empty Name defaults to the id, an empty Currency to
// DefaultCurrency.
func (s *Store) EnsureProduct(ctx context.Context, p Product) (created bool, err error) {
	if !ValidID(p.ID) {
		return false, invalid("id", "Product ids are 1–64 characters from A–Z a–z 0–9 _ -.")
	}
	if p.Name == "" {
		p.Name = p.ID
	}
	if p.Currency == "" {
		p.Currency = DefaultCurrency
	}
	if p.MaxPerOrder == 0 {
		p.MaxPerOrder = DefaultMaxPerOrder
	}
	if p.MaxPerTicket == 0 {
		p.MaxPerTicket = DefaultMaxPerTicket
	}
	patch := ProductPatch{Name: &p.Name, Price: &p.Price, Currency: &p.Currency, Stock: &p.Stock, Queue: &p.Queue, MaxPerOrder: &p.MaxPerOrder, MaxPerTicket: &p.MaxPerTicket}
	if err := patch.Validate(); err != nil {
		return false, err
	}
	err = s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `INSERT INTO products (id, name, price, stock, queue, max_per_order, max_per_ticket, currency)
			VALUES ($1, $2, $3, $4, NULLIF($5, ''), $6, $7, $8)
			ON CONFLICT (id) DO NOTHING`, p.ID, p.Name, p.Price, p.Stock, p.Queue, p.MaxPerOrder, p.MaxPerTicket, p.Currency)
		created = tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("orders: ensure product %q: %w", p.ID, err)
	}
	return created, nil
}
