package analytics

import (
	"context"
	"embed"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/waitroom/waitroom/internal/pgmigrate"
)

// The analytics migrations: the history (queue_history, queue_sellouts) and the audit log
// (audit_log), recorded in analytics_schema_migrations. A version is its file's name, the
// same name older releases record for it as an orders migration.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// ordersVersions are the migrations that older releases run as orders migrations (recorded
// in schema_migrations). A database such a release migrated has these adopted, not run again;
// a database migrated here has them written into schema_migrations too, so an older instance,
// whose orders migrations still list them, starts on it without running them over the
// existing tables (docs/UPGRADING.md, "analytics owns its migrations").
var ordersVersions = []string{"008_history", "009_audit", "011_history_sale_edges"}

// Migrate applies the analytics migrations not yet recorded, in file name order, each in its
// own transaction, and returns how many it ran. It holds the lock the orders migrations hold,
// so instances starting at once (of this release or an older one) apply each exactly once.
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
