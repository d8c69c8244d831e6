package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"teamsbot/internal/keyfile"
	"teamsbot/internal/retry"
	"teamsbot/internal/web"
	"teamsbot/mcpauth"
	"teamsbot/signin"
	"teamsbot/store"
	"teamsbot/viewpage"
)

// storeFile is the bbolt file under TICKETIQ_DATA.
const storeFile = "teamsbot.db"

// databaseStartRetry is how a replica that starts before its database (a
// cluster coming up together) tries again: each wait about twice the last,
// from a second up to 15, for two minutes of waiting in all (the attempts
// are bounded by that, not by their number).
func databaseStartRetry() retry.Policy {
	return retry.Policy{Attempts: 1000, First: time.Second, Max: 15 * time.Second, Budget: 2 * time.Minute}
}

// openStore opens the store the configuration names: the bbolt file under
// TICKETIQ_DATA, or the PostgreSQL database of TICKETIQ_DATABASE_URL.
func openStore(ctx context.Context, cfg config, logger *slog.Logger) (*store.Store, error) {
	opts := store.Options{Logger: logger.With("part", "store"), AuditRetention: cfg.AuditRetention, RunRetention: cfg.RunRetention}
	if cfg.DatabaseURL == "" {
		return store.Open(ctx, filepath.Join(cfg.DataDir, storeFile), opts)
	}
	if err := checkSharedKeys(cfg.DataDir, usesAuth(cfg.Agents)); err != nil {
		return nil, err
	}
	r := databaseStartRetry().Start()
	for {
		st, err := store.OpenPostgres(ctx, cfg.DatabaseURL, opts)
		if err == nil {
			return st, nil
		}
		if errors.Is(err, store.ErrSchemaTooNew) || errors.Is(err, store.ErrInvalid) {
			return nil, err
		}
		wait, werr := r.Next(ctx, "")
		if werr != nil {
			return nil, err
		}
		logger.Warn("the database cannot be reached yet; trying again", "in", wait.String(), "err", err)
		if r.Sleep(ctx, wait) != nil {
			return nil, err
		}
	}
}

// sharedKeyFiles are the files under TICKETIQ_DATA that every replica must
// hold the same copy of: the frame token keys (a frame token one replica
// mints is verified by whichever serves the frame) and the cookie key (a
// session one replica seals is opened by whichever serves the next
// request).
// With servers reached as each person, the MCP token keys too (a token
// one replica seals is opened by whichever runs the person's next call).
func sharedKeyFiles(auth bool) []string {
	files := []string{viewpage.TokenKeyFile, signin.CookieKeyFile}
	if auth {
		files = append(files, filepath.Base(mcpauth.TokenKeys("").Path))
	}
	return files
}

// checkSharedKeys refuses to start on PostgreSQL without the shared key
// files: each replica would otherwise make keys of its own, and every
// request that reached another replica would be refused.
func checkSharedKeys(dir string, auth bool) error {
	var missing []string
	for _, name := range sharedKeyFiles(auth) {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, filepath.Join(dir, name))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("on PostgreSQL (TICKETIQ_DATABASE_URL) every replica needs the same key files, and %q is missing: make them once with `teamsbot keys`, then give every replica the same copies (a mounted secret) in its TICKETIQ_DATA", missing)
	}
	return nil
}

// sharedKeys are the key files of sharedKeyFiles, for `teamsbot keys`.
func sharedKeys(dir string) []keyfile.File {
	return []keyfile.File{viewpage.TokenKeys(dir), signin.CookieKeys(dir), mcpauth.TokenKeys(dir)}
}

// makeKeys is `teamsbot keys`: it makes the shared key files under
// TICKETIQ_DATA when they are missing, keeps those that exist, and lists
// each file's keys.
func makeKeys(cfg config, stdout io.Writer) error {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	for _, f := range sharedKeys(cfg.DataDir) {
		if _, err := f.LoadOrCreate(time.Now(), slog.New(slog.DiscardHandler)); err != nil {
			return err
		}
	}
	return listKeys(cfg.DataDir, stdout)
}

// rotateKeys is `teamsbot keys rotate`: it adds a new key to each shared
// key file (making a missing file), which then signs; the older keys still
// verify until retired. A one-key file of an earlier version is rewritten
// with key ids.
func rotateKeys(cfg config, now time.Time, stdout io.Writer) error {
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	for _, f := range sharedKeys(cfg.DataDir) {
		k, err := f.Rotate(now)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "added %s %s to %s\n", f.Name, k.ID, f.Path)
	}
	fmt.Fprintln(stdout, "Give every replica these files and restart them; once what the older keys signed has expired, retire those keys with `teamsbot keys retire ID...`.")
	return listKeys(cfg.DataDir, stdout)
}

// retireKeys is `teamsbot keys retire ID...`: it removes each key from
// the shared key file that holds it. What those keys signed is refused
// once the service reads the files again.
func retireKeys(cfg config, ids []string, stdout io.Writer) error {
	if len(ids) == 0 {
		return errors.New("`teamsbot keys retire` needs the ids of the keys to retire; `teamsbot keys` lists them")
	}
	for _, id := range ids {
		found := false
		for _, f := range sharedKeys(cfg.DataDir) {
			ok, err := f.Retire(id)
			if err != nil {
				if errors.Is(err, keyfile.ErrCurrent) {
					return fmt.Errorf("key %s signs in %s and cannot be retired: run `teamsbot keys rotate` first", id, f.Path)
				}
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return err
			}
			if ok {
				found = true
				fmt.Fprintf(stdout, "retired %s %s from %s\n", f.Name, id, f.Path)
			}
		}
		if !found {
			return fmt.Errorf("no key file in %s holds a key %q; `teamsbot keys` lists them", cfg.DataDir, id)
		}
	}
	return listKeys(cfg.DataDir, stdout)
}

// listKeys prints each shared key file and its keys, oldest first, with
// the one that signs marked.
func listKeys(dir string, stdout io.Writer) error {
	for _, f := range sharedKeys(dir) {
		ks, err := f.Load()
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, f.Path)
		for i, k := range ks {
			role := "verifies"
			if i == len(ks)-1 {
				role = "signs"
			}
			id := k.ID
			if id == "" {
				id = "(no id: a file of an earlier version; `teamsbot keys rotate` gives it one)"
			}
			created := "-"
			if !k.Created.IsZero() {
				created = k.Created.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(stdout, "  %s  %s  %s\n", id, created, role)
		}
	}
	return nil
}

// migrate is `teamsbot migrate`: it copies the bbolt file under
// TICKETIQ_DATA into the database of TICKETIQ_DATABASE_URL and prints what
// it did. The service must be stopped (the file's lock says so); running
// it again copies nothing twice.
func migrate(ctx context.Context, cfg config, stdout io.Writer, logger *slog.Logger) error {
	if cfg.DatabaseURL == "" {
		return errors.New("migrate: set TICKETIQ_DATABASE_URL to the PostgreSQL database to copy into")
	}
	path := filepath.Join(cfg.DataDir, storeFile)
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("migrate: no store file to copy: %w", err)
	}
	src, err := store.Open(ctx, path, store.Options{Logger: logger, OpenTimeout: 2 * time.Second})
	if err != nil {
		return fmt.Errorf("migrate: %w (stop the service first)", err)
	}
	defer src.Close()
	dst, err := store.OpenPostgres(ctx, cfg.DatabaseURL, store.Options{Logger: logger})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer dst.Close()
	counts, err := store.CopyToPostgres(ctx, src, dst)
	for _, c := range counts {
		line := fmt.Sprintf("%-16s %7d read %7d copied %7d already there", c.Kind, c.Read, c.Inserted, c.AlreadyThere)
		if c.Skipped > 0 {
			line += fmt.Sprintf(" %7d skipped (%s)", c.Skipped, c.SkipReason)
		}
		fmt.Fprintln(stdout, line)
	}
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	fmt.Fprintf(stdout, "copied %s into %s\n", path, cfg.storeName())
	if err := checkSharedKeys(cfg.DataDir, usesAuth(cfg.Agents)); err != nil {
		fmt.Fprintln(stdout, "before starting replicas:", err)
	}
	return nil
}

// databaseGate answers 503 while the database is unreachable, so that a
// request is refused whole, and retried by its sender, rather than fail
// half way (a turn whose answer cannot be kept, a page whose view cannot
// be read). Liveness, readiness and metrics stay open: they say what is
// wrong.
type databaseGate struct {
	down atomic.Bool
	// last is the last probe's error (nil: it answered); /readyz reports
	// it, so that a burst of probes costs the database nothing.
	last atomic.Pointer[error]
}

// err is what the last probe found; nil before the first.
func (g *databaseGate) err() error {
	if p := g.last.Load(); p != nil {
		return *p
	}
	return nil
}

// Probe pacing: every databaseProbeUp while the database answers; while it
// does not, from databaseProbeFirst doubling up to databaseProbeMax.
const (
	databaseProbeUp    = 2 * time.Second
	databaseProbeFirst = 250 * time.Millisecond
	databaseProbeMax   = 5 * time.Second
	databaseProbeLimit = 2 * time.Second
)

// watch pings the store until ctx ends, noting whether it answers.
func (g *databaseGate) watch(ctx context.Context, st *store.Store, logger *slog.Logger) {
	wait := databaseProbeUp
	for {
		pctx, cancel := context.WithTimeout(ctx, databaseProbeLimit)
		err := st.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		g.last.Store(&err)
		was := g.down.Swap(err != nil)
		switch {
		case err != nil && !was:
			logger.Warn("the database is unreachable: requests are answered 503 until it is back", "err", err)
			wait = databaseProbeFirst
		case err != nil:
			wait = min(wait*2, databaseProbeMax)
		case was:
			logger.Info("the database is reachable again")
			wait = databaseProbeUp
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// middleware refuses requests while the database is down.
func (g *databaseGate) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !g.down.Load() {
			return next(c)
		}
		switch c.Request().URL.Path {
		case "/healthz", "/readyz", "/metrics":
			return next(c)
		}
		c.Response().Header().Set("Retry-After", "5")
		return errDatabaseDown
	}
}

// errDatabaseDown answers every request but health, readiness and metrics
// while the database is unreachable, as a page or as JSON like any other
// error; the gate logs the outage once, not each request.
var errDatabaseDown = &web.Error{Status: http.StatusServiceUnavailable, Logged: true,
	Message: "The service cannot reach its database right now. Try again in a moment."}
