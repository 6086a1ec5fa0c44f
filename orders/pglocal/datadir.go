package pglocal

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// prepareDataDir creates the data directory with the right owner and, when it is empty,
// runs initdb (or copies the cluster initdb made earlier: Options.InitCache).
func (in *Instance) prepareDataDir(ctx context.Context, major string) error {
	if err := os.MkdirAll(filepath.Dir(in.dataDir), 0o755); err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	if err := os.Mkdir(in.dataDir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Errorf("pglocal: %w", err)
	}
	if err := in.acct.checkReachable(in.dataDir); err != nil {
		return err
	}
	entries, err := os.ReadDir(in.dataDir)
	if err != nil {
		return fmt.Errorf("pglocal: %w", err)
	}
	if len(entries) > 0 {
		v, err := os.ReadFile(filepath.Join(in.dataDir, "PG_VERSION"))
		if err != nil {
			return fmt.Errorf("pglocal: %s is neither empty nor a PostgreSQL data directory: %w", in.dataDir, err)
		}
		if got := strings.TrimSpace(string(v)); got != major {
			return fmt.Errorf("pglocal: %s holds a PostgreSQL %s cluster but the binaries in %s are version %s; "+
				"use another data directory or matching binaries", in.dataDir, got, in.binDir, major)
		}
		return nil
	}
	if err := in.acct.own(in.dataDir); err != nil {
		return err
	}
	args := []string{"-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C"}
	if in.opts.NoSync {
		args = append(args, "--no-sync")
	}
	if in.opts.InitCache != "" {
		return in.initFromCache(ctx, major, args)
	}
	return in.initdb(ctx, in.dataDir, args)
}

// initdb runs initdb into dir (empty, owned by the server account) with args.
func (in *Instance) initdb(ctx context.Context, dir string, args []string) error {
	runDir, err := in.makeRunDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(runDir)
	p, err := in.launch(runDir, "initdb", append([]string{"-D", dir}, args...)...)
	if err != nil {
		return err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		_ = signalGroup(p.pid(), sigKill)
		<-p.done
		return fmt.Errorf("pglocal: initdb: %w", ctx.Err())
	}
	if p.err != nil {
		return fmt.Errorf("pglocal: initdb %s: %w\n%s", dir, p.err, in.log.String())
	}
	return nil
}

// initFromCache fills the empty data directory with a copy of a cluster initdb made earlier
// with the same binaries, options and server account, kept in Options.InitCache (made
// there first when missing: initdb into a directory of its own, renamed into place only
// when complete, so a cache entry is always whole and concurrent starts race harmlessly).
// A copy costs a fraction of initdb's ~1 CPU-second. The cache is used only when its
// folder is this process's own and writable by nobody else (a cluster planted there would
// run its settings as the server account); otherwise, or when anything about the cache
// fails, initdb runs into the data directory as without a cache.
func (in *Instance) initFromCache(ctx context.Context, major string, args []string) error {
	cached, err := in.cacheEntry(major, args)
	if err == nil {
		err = in.fillCache(ctx, cached, args)
	}
	if err == nil {
		if err = copyTree(cached, in.dataDir, in.acct.own); err == nil {
			return nil
		}
		// A partial copy: the data directory is emptied for initdb.
		entries, _ := os.ReadDir(in.dataDir)
		for _, e := range entries {
			_ = os.RemoveAll(filepath.Join(in.dataDir, e.Name()))
		}
	}
	fmt.Fprintf(in.log, "pglocal: init cache %s not used (%v): initdb instead\n", in.opts.InitCache, err)
	return in.initdb(ctx, in.dataDir, args)
}

// cacheEntry checks the cache folder and names the entry for these binaries and options:
// the key covers the binaries (path, size and time of initdb and postgres), the major
// version, the server account and this process's user, and initdb's arguments.
func (in *Instance) cacheEntry(major string, args []string) (string, error) {
	dir := in.opts.InitCache
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := privateDir(dir); err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n%d\n%s\n", in.binDir, major, in.acct.name, os.Geteuid(), strings.Join(args, "\x00"))
	for _, name := range []string{"initdb", "postgres"} {
		st, err := os.Stat(filepath.Join(in.binDir, name))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d %d\n", name, st.Size(), st.ModTime().UnixNano())
	}
	if err := in.acct.checkReachable(filepath.Join(dir, "x")); err != nil {
		return "", err
	}
	return filepath.Join(dir, fmt.Sprintf("pg%s-%x", major, h.Sum(nil)[:8])), nil
}

// fillCache makes the entry cached when it is missing. Directories left by a start that
// was killed while it ran initdb (an hour old) are removed on the way.
func (in *Instance) fillCache(ctx context.Context, cached string, args []string) error {
	if _, err := os.Stat(filepath.Join(cached, "PG_VERSION")); err == nil {
		return nil
	}
	if old, _ := filepath.Glob(filepath.Join(in.opts.InitCache, "initdb-*")); len(old) > 0 {
		for _, d := range old {
			if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > time.Hour {
				_ = os.RemoveAll(d)
			}
		}
	}
	tmp, err := os.MkdirTemp(in.opts.InitCache, "initdb-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone after the rename; removed when anything failed
	if err := in.acct.own(tmp); err != nil {
		return err
	}
	if err := in.initdb(ctx, tmp, args); err != nil {
		return err
	}
	// Another start may have put its own in place meanwhile: either is the same cluster.
	if err := os.Rename(tmp, cached); err != nil {
		if _, serr := os.Stat(filepath.Join(cached, "PG_VERSION")); serr != nil {
			return err
		}
	}
	return nil
}

// copyTree copies the contents of src into the existing directory dst — directories and
// regular files with their permissions (dst's own too: PostgreSQL wants 0700 or 0750) —
// and hands each copy to own (the server account when this process is root).
func copyTree(src, dst string, own func(string) error) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel == "." {
				if err := os.Chmod(to, info.Mode().Perm()); err != nil {
					return err
				}
				return nil // dst is owned already (prepareDataDir)
			}
			if err := os.Mkdir(to, info.Mode().Perm()); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := copyFile(path, to, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: not a file or directory", path)
		}
		return own(to)
	})
}

func copyFile(from, to string, perm fs.FileMode) error {
	r, err := os.Open(from)
	if err != nil {
		return err
	}
	defer r.Close()
	w, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

func (in *Instance) makeRunDir() (string, error) {
	dir, err := os.MkdirTemp("", "pglocal-")
	if err != nil {
		return "", fmt.Errorf("pglocal: %w", err)
	}
	if err := in.acct.checkReachable(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	if err := in.acct.own(dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}
