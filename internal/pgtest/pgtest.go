// Package pgtest gives a test a PostgreSQL database of its own: created
// with a random name on the server that TEAMSBOT_TEST_DATABASE_URL names
// (./test.sh starts a throwaway one and sets it), dropped when the test
// ends, so that tests on PostgreSQL run in parallel without seeing each
// other's rows.
//
// A test that needs PostgreSQL fails when the variable is unset or the
// server cannot be reached: a missing database must not pass as a skipped
// test. Under -short it is skipped instead.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable that holds the URL of the test server, on a
// database the tests may connect to to create theirs (such as postgres).
const EnvURL = "TEAMSBOT_TEST_DATABASE_URL"

// Database creates a fresh database, drops it at the end of t, and
// returns its URL.
func Database(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("PostgreSQL is left out under -short")
	}
	admin := os.Getenv(EnvURL)
	if admin == "" {
		t.Fatalf("%s is not set: ./test.sh starts a throwaway PostgreSQL and sets it (or run with -short to leave PostgreSQL out)", EnvURL)
	}
	u, err := url.Parse(admin)
	if err != nil {
		t.Fatalf("%s is not a URL", EnvURL)
	}
	b := make([]byte, 8)
	rand.Read(b)
	name := "teamsbot_test_" + hex.EncodeToString(b)
	runSQL(t, admin, "CREATE DATABASE "+name)
	t.Cleanup(func() { runSQL(t, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	u.Path = "/" + name
	return u.String()
}

// runSQL runs one statement on the server's admin database.
func runSQL(t testing.TB, admin, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("PostgreSQL at %s cannot be reached: %v", EnvURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
