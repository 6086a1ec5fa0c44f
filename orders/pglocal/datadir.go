package pglocal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// prepareDataDir creates the data directory with the right owner and runs initdb when it
// is empty.
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
	runDir, err := in.makeRunDir()
	if err != nil {
		return err
	}
	defer os.RemoveAll(runDir)
	args := []string{"-D", in.dataDir, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C"}
	if in.opts.NoSync {
		args = append(args, "--no-sync")
	}
	p, err := in.launch(runDir, "initdb", args...)
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
		return fmt.Errorf("pglocal: initdb %s: %w\n%s", in.dataDir, p.err, in.log.String())
	}
	return nil
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
