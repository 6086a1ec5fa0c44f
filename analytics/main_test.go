package analytics

import (
	"testing"

	"github.com/waitroom/waitroom/orders/pgtest"
)

// TestMain starts the shared test PostgreSQL of the package's tests (history and audit);
// each test takes its own database with pgtest.MustDB.
func TestMain(m *testing.M) { pgtest.Main(m) }
