package analytics

import (
	"context"
	"embed"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waitroom/waitroom/internal/pgmigrate"
)

// The analytics migrations: the history (queue_history, queue_sellouts) and the audit log
// (audit_log), recorded in analytics_schema_migrations. A version is its file's name, kept
// from when these ran as orders migrations.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// ordersVersions are the migrations earlier releases ran as orders migrations (recorded in
// schema_migrations). A database they migrated has these adopted, not run again; a database
// this release migrates has them written into schema_migrations too, so an instance of the
// release before, whose orders migrations still list them, starts on it without running them
// over the existing tables.
var ordersVersions = []string{"008_history", "009_audit", "011_history_sale_edges"}

// Migrate applies the analytics migrations not yet recorded, in file name order, each in its
// own transaction, and returns how many it ran. It holds the lock the orders migrations hold,
// so instances starting at once (of this release or the one before) apply each exactly once.
// The tables reference none of the orders tables: the order of the two packages' runs does
// not matter.
func Migrate(ctx context.Context, pool *pgxpool.Pool) (applied int, err error) {
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return 0, err
	}
	return pgmigrate.Set{
		Name:        "analytics",
		Files:       files,
		Table:       "analytics_schema_migrations",
		Moved:       &pgmigrate.Moved{Table: "schema_migrations", Versions: ordersVersions},
		Classify:    classify,
		Unavailable: ErrUnavailable,
	}.Run(ctx, pool)
}
