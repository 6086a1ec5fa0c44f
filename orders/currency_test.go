package orders_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/waitroom/waitroom/orders"
)

// The allow-list holds the common currencies with ISO 4217's minor units, and nothing
// that is not an upper-case code on it passes.
func TestCurrencyAllowList(t *testing.T) {
	t.Parallel()
	want := map[string]int{
		"USD": 2, "EUR": 2, "GBP": 2, "JPY": 0, "KRW": 0, "CNY": 2, "CHF": 2, "CAD": 2,
		"AUD": 2, "SEK": 2, "NOK": 2, "DKK": 2, "PLN": 2, "CZK": 2, "HUF": 2, "INR": 2,
		"SGD": 2, "HKD": 2, "TWD": 2, "THB": 2, "NZD": 2, "MXN": 2, "BRL": 2, "ZAR": 2,
		"KWD": 3,
	}
	for code, digits := range want {
		if got, ok := orders.CurrencyDigits(code); !ok || got != digits {
			t.Errorf("CurrencyDigits(%q) = %d, %v; want %d, true", code, got, ok, digits)
		}
	}
	for _, bad := range []string{"", "usd", "Usd", "XYZ", "UDS", "US", "USDD", " USD", "EUR\x00", "₩"} {
		if orders.ValidCurrency(bad) {
			t.Errorf("ValidCurrency(%q) = true", bad)
		}
		c := bad
		err := orders.ProductPatch{Currency: &c}.Validate()
		var ie *orders.InvalidError
		if !errors.As(err, &ie) || ie.Field != "currency" || !errors.Is(err, orders.ErrInvalid) {
			t.Errorf("Validate(currency %q) = %v; want an InvalidError naming currency", bad, err)
		}
	}
	if orders.DefaultCurrency != "USD" || !orders.ValidCurrency(orders.DefaultCurrency) {
		t.Fatalf("DefaultCurrency %q", orders.DefaultCurrency)
	}
}

// A new product without a currency is DefaultCurrency; a set one is kept by later
// patches that do not name it; a refused one changes nothing.
func TestProductCurrency(t *testing.T) {
	t.Parallel()
	s, _ := mustOpen(t, orders.Config{})
	ctx := ctxT(t)
	p, _, err := s.PutProduct(ctx, "plain", orders.ProductPatch{})
	if err != nil || p.Currency != orders.DefaultCurrency {
		t.Fatalf("new product: %+v, %v; want currency %s", p, err, orders.DefaultCurrency)
	}
	krw, price := "KRW", int64(129000)
	if p, _, err = s.PutProduct(ctx, "won", orders.ProductPatch{Currency: &krw, Price: &price}); err != nil || p.Currency != "KRW" || p.Price != 129000 {
		t.Fatalf("KRW product: %+v, %v", p, err)
	}
	stock := 3
	if p, _, err = s.PutProduct(ctx, "won", orders.ProductPatch{Stock: &stock}); err != nil || p.Currency != "KRW" {
		t.Fatalf("a patch without currency: %+v, %v; want KRW kept", p, err)
	}
	bad := "krw"
	if _, _, err = s.PutProduct(ctx, "won", orders.ProductPatch{Currency: &bad}); !errors.Is(err, orders.ErrInvalid) {
		t.Fatalf("lower-case currency: %v, want ErrInvalid", err)
	}
	if p, err = s.Product(ctx, "won"); err != nil || p.Currency != "KRW" {
		t.Fatalf("after a refused change: %+v, %v", p, err)
	}
	if _, err := s.EnsureProduct(ctx, orders.Product{ID: "demo"}); err != nil {
		t.Fatal(err)
	}
	if p, err = s.Product(ctx, "demo"); err != nil || p.Currency != orders.DefaultCurrency {
		t.Fatalf("EnsureProduct without currency: %+v, %v", p, err)
	}
}

// Migration 005 gives the products that existed before it (and rows an old instance, which
// names no currency, inserts) the default currency, and the column refuses a code that is
// not three upper-case letters even from raw SQL.
func TestCurrencyMigrationDefault(t *testing.T) {
	t.Parallel()
	_, dsn := mustOpen(t, orders.Config{})
	ctx := ctxT(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	// Back to the schema before 005, with a product made then.
	for _, q := range []string{
		"ALTER TABLE products DROP COLUMN currency",
		"DELETE FROM schema_migrations WHERE version = '005_product_currency'",
		"INSERT INTO products (id, name, price, stock) VALUES ('old', 'Old shoe', 12900, 2)",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if applied, err := orders.Migrate(ctx, dsn); err != nil || applied != 1 {
		t.Fatalf("migrate: applied %d, %v; want 005 alone", applied, err)
	}
	if c := query[string](t, dsn, "SELECT currency FROM products WHERE id = 'old'"); c != "USD" {
		t.Fatalf("a product from before the migration: currency %q, want USD", c)
	}
	// An old instance's INSERT names no currency.
	if _, err := conn.Exec(ctx, "INSERT INTO products (id, name, price, stock) VALUES ('older', 'x', 1, 1)"); err != nil {
		t.Fatal(err)
	}
	if c := query[string](t, dsn, "SELECT currency FROM products WHERE id = 'older'"); c != "USD" {
		t.Fatalf("an old instance's insert: currency %q, want USD", c)
	}
	if _, err := conn.Exec(ctx, "UPDATE products SET currency = 'usd' WHERE id = 'old'"); err == nil {
		t.Fatal("the column took a lower-case code")
	}
}

// docs/openapi.yaml lists the same currencies as the code (its Currency schema's enum),
// so the e2e spec check cannot drift from what the server accepts.
func TestCurrencyListMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := string(b)
	i := strings.Index(spec, "\n    Currency:\n")
	if i < 0 {
		t.Fatal("no Currency schema in docs/openapi.yaml")
	}
	rest := spec[i:]
	j := strings.Index(rest, "enum: [")
	k := strings.Index(rest[j:], "]")
	if j < 0 || k < 0 {
		t.Fatal("no enum in the Currency schema")
	}
	var listed []string
	for _, c := range strings.Split(rest[j+len("enum: ["):j+k], ",") {
		listed = append(listed, strings.TrimSpace(c))
	}
	if got, want := strings.Join(listed, " "), strings.Join(orders.Currencies(), " "); got != want {
		t.Fatalf("docs/openapi.yaml Currency enum:\n%s\nthe code's list:\n%s", got, want)
	}
}
