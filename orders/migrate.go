package orders

import (
	"context"
	"embed"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waitroom/waitroom/internal/pgmigrate"
)

// The orders migrations: products and orders, recorded in schema_migrations. The history
// and audit tables are analytics' (its own migrations); older releases run them here as
// 008, 009 and 011, so their rows in schema_migrations stay (docs/UPGRADING.md, "analytics
// owns its migrations").
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate applies the embedded migrations not yet recorded in schema_migrations, in file
// name order, each in its own transaction (pgmigrate), and returns how many it applied.
func migrate(ctx context.Context, pool *pgxpool.Pool) (applied int, err error) {
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return 0, err
	}
	return pgmigrate.Set{
		Name:        "orders",
		Files:       files,
		Table:       "schema_migrations",
		Classify:    classify,
		Unavailable: ErrUnavailable,
	}.Run(ctx, pool)
}
