package orders

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Product is one product. Price is in minor units.
type Product struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Price     int64     `json:"price"`
	Stock     int       `json:"stock"`
	UpdatedAt time.Time `json:"-"`
}

// ProductPatch is a partial update: nil fields keep their value, or take the default when
// the product is created (name = id, price 0, stock 0).
type ProductPatch struct {
	Name  *string
	Price *int64
	Stock *int
}

// Limits on input.
const (
	MaxQuantity = 1000
	maxStock    = 1_000_000_000
	maxNameLen  = 200
)

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidID reports whether id is a valid product id: 1–64 characters from A–Z a–z 0–9 _ -.
// (The web layer answers 404 for an invalid id in a path, 422 in a body.)
func ValidID(id string) bool { return idPattern.MatchString(id) }

const productColumns = "id, name, price, stock, updated_at"

func scanProduct(row pgx.Row) (Product, error) {
	var p Product
	err := row.Scan(&p.ID, &p.Name, &p.Price, &p.Stock, &p.UpdatedAt)
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

func (p ProductPatch) validate() error {
	if p.Name != nil && (*p.Name == "" || utf8.RuneCountInString(*p.Name) > maxNameLen || !utf8.ValidString(*p.Name)) {
		return invalid("name", "name must be 1–%d characters.", maxNameLen)
	}
	if p.Price != nil && *p.Price < 0 {
		return invalid("price", "price must not be negative.")
	}
	if p.Stock != nil && (*p.Stock < 0 || *p.Stock > maxStock) {
		return invalid("stock", "stock must be between 0 and %d.", maxStock)
	}
	return nil
}

// PutProduct creates the product or updates the fields set in patch, in one statement.
// created reports whether it did not exist before.
func (s *Store) PutProduct(ctx context.Context, id string, patch ProductPatch) (p Product, created bool, err error) {
	if !ValidID(id) {
		return Product{}, false, invalid("id", "Product ids are 1–64 characters from A–Z a–z 0–9 _ -.")
	}
	if err := patch.validate(); err != nil {
		return Product{}, false, err
	}
	err = s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		// xmax = 0 on the returned row version means it was inserted, not updated.
		row := c.QueryRow(ctx, `
			INSERT INTO products AS p (id, name, price, stock, updated_at)
			VALUES ($1, COALESCE($2, $1), COALESCE($3, 0), COALESCE($4, 0), now())
			ON CONFLICT (id) DO UPDATE SET
				name       = COALESCE($2, p.name),
				price      = COALESCE($3, p.price),
				stock      = COALESCE($4, p.stock),
				updated_at = now()
			RETURNING `+productColumns+`, (xmax = 0)`,
			id, patch.Name, patch.Price, patch.Stock)
		return row.Scan(&p.ID, &p.Name, &p.Price, &p.Stock, &p.UpdatedAt, &created)
	})
	if err != nil {
		return Product{}, false, fmt.Errorf("orders: put product %q: %w", id, err)
	}
	return p, created, nil
}

// EnsureProduct creates p if no product with its id exists (demo data) and leaves an
// existing one untouched. An empty Name defaults to the id.
func (s *Store) EnsureProduct(ctx context.Context, p Product) (created bool, err error) {
	if !ValidID(p.ID) {
		return false, invalid("id", "Product ids are 1–64 characters from A–Z a–z 0–9 _ -.")
	}
	if p.Name == "" {
		p.Name = p.ID
	}
	if err := (ProductPatch{Name: &p.Name, Price: &p.Price, Stock: &p.Stock}).validate(); err != nil {
		return false, err
	}
	err = s.withConn(ctx, func(ctx context.Context, c *pgxpool.Conn) error {
		tag, err := c.Exec(ctx, `INSERT INTO products (id, name, price, stock) VALUES ($1, $2, $3, $4)
			ON CONFLICT (id) DO NOTHING`, p.ID, p.Name, p.Price, p.Stock)
		created = tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("orders: ensure product %q: %w", p.ID, err)
	}
	return created, nil
}
