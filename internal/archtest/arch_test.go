// Package archtest holds the house's import rules as a test: which package may import
// which, as README's project structure writes them. It reads the import lines of every
// non-test Go file of the module (go/parser), so it needs no tool beyond the compiler.
package archtest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/waitroom/waitroom/"

// imports maps each package directory of the module (relative, "." for the root) to the
// import paths its non-test files name.
func imports(t *testing.T) map[string]map[string]bool {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n != "." && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			if p != root {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // a module of its own (deploy/k8s)
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		dir = filepath.ToSlash(dir)
		if out[dir] == nil {
			out[dir] = map[string]bool{}
		}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			out[dir][path] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// only says which package directories may import path (a prefix matches its subpackages).
func only(t *testing.T, all map[string]map[string]bool, path string, allowed ...string) {
	t.Helper()
	var bad []string
	for dir, ims := range all {
		for im := range ims {
			if im != path && !strings.HasPrefix(im, path+"/") {
				continue
			}
			ok := false
			for _, a := range allowed {
				if dir == a || strings.HasPrefix(dir, a+"/") {
					ok = true
				}
			}
			if !ok {
				bad = append(bad, dir+" imports "+im)
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s (only %v may)", b, allowed)
	}
}

// never says that package directory dir imports none of the module's packages named.
func never(t *testing.T, all map[string]map[string]bool, dir string, pkgs ...string) {
	t.Helper()
	if all[dir] == nil {
		t.Errorf("no package %s", dir)
		return
	}
	for im := range all[dir] {
		for _, p := range pkgs {
			if im == module+p || strings.HasPrefix(im, module+p+"/") {
				t.Errorf("%s imports %s", dir, im)
			}
		}
	}
}

func TestImportRules(t *testing.T) {
	all := imports(t)
	// One owner of Redis: the key names and scripts are rstore's; go-redis is used by the
	// nouns over it and by the wiring.
	only(t, all, "github.com/redis/go-redis/v9", "internal/rstore", "queue", "trust", "topology", "branding", "autorate", "notify", "server", "k6")
	only(t, all, module+"internal/rstore", "queue", "trust", "topology", "branding", "autorate", "notify", "server", "k6")
	never(t, all, "internal/rstore", "queue", "trust", "topology", "branding", "autorate", "notify", "web", "stream", "orders", "analytics", "admission", "soldout", "server")
	// Fiber only in web; PostgreSQL only in the stores that own tables.
	only(t, all, "github.com/gofiber/fiber/v2", "web", "server")
	only(t, all, "github.com/jackc/pgx/v5", "orders", "analytics", "internal/pgmigrate", "server")
	// The line does not reach up or sideways.
	never(t, all, "queue", "trust", "branding", "autorate", "web", "stream", "orders", "analytics", "admission", "soldout", "server")
	for _, noun := range []string{"trust", "topology", "branding", "autorate", "notify"} {
		never(t, all, noun, "web", "stream", "orders", "analytics", "server")
	}
	never(t, all, "topology", "queue")
	// The demo's simulated crowd uses the line as any visitor does, through queue alone.
	never(t, all, "crowd", "internal/rstore", "web", "stream", "orders", "analytics", "server")
	never(t, all, "orders", "queue", "web", "stream", "server")
	never(t, all, "stream", "web", "orders", "server")
}
