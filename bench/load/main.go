// Command load is the side-by-side load benchmark of bench/side-by-side.sh:
// it plays the Bot Framework on loopback (OpenID metadata, token endpoint,
// a Bot Connector over https), drives teamsbot and two reference bots with
// the same Teams messages in alternating rounds, drives the view path
// against a no-op floor, measures the store with many views, and writes a
// Markdown table of the figures with their ratios. It also measures the
// replicas on PostgreSQL (bench/replicas.sh) and many slow streamed turns
// at once against a fake streaming model (bench/streams.sh). All load goes
// to 127.0.0.1 and is bounded in count and time.
//
// Usage:
//
//	load side-by-side -teamsbot BIN -botbuilder SCRIPT [-rounds 3] [-seconds 3] [-views 1000000] [-out FILE]
//	load floorbot -addr ADDR -metadata URL -token-url URL -card FILE [-ca FILE]
//	load noop -addr ADDR
//	load store -dir DIR [-views 1000000]
//	load replicas -teamsbot BIN -database URL [-rounds 3] [-seconds 3] [-out FILE]
//	load streams -teamsbot BIN [-turns 10000] [-chats 1000] [-tenants 100] [-out FILE] [-profile] [-gomemlimit SIZE] [-service-nice N]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

// run is the whole program, so that a test can call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) < 2 {
		return errors.New("usage: load side-by-side|floorbot|noop|store|replicas|streams [flags]")
	}
	fs := flag.NewFlagSet("load "+args[1], flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch args[1] {
	case "floorbot":
		addr := fs.String("addr", "127.0.0.1:0", "listen address")
		meta := fs.String("metadata", "", "OpenID metadata URL")
		tok := fs.String("token-url", "", "token endpoint URL")
		card := fs.String("card", "", "the Adaptive Card to answer with (JSON file)")
		ca := fs.String("ca", "", "the certificate to trust for https (default: the system's)")
		if err := fs.Parse(args[2:]); err != nil {
			return err
		}
		if err := loopbackAddr(*addr); err != nil {
			return err
		}
		return serveFloorBot(ctx, *addr, *meta, *tok, *card, *ca)
	case "noop":
		addr := fs.String("addr", "127.0.0.1:0", "listen address")
		if err := fs.Parse(args[2:]); err != nil {
			return err
		}
		if err := loopbackAddr(*addr); err != nil {
			return err
		}
		return serveNoop(ctx, *addr)
	case "crashwrite":
		// Internal to the store measurement: a writer that ends without
		// closing the store, as a killed service does.
		path := fs.String("path", "", "the store file")
		if err := fs.Parse(args[2:]); err != nil {
			return err
		}
		return crashWrite(ctx, *path)
	case "store":
		dir := fs.String("dir", "", "folder for the store file (required)")
		n := fs.Int("views", 1_000_000, "views to store")
		if err := fs.Parse(args[2:]); err != nil {
			return err
		}
		if *dir == "" {
			return errors.New("store: -dir is required")
		}
		r, err := benchStore(ctx, *dir+"/teamsbot.db", *n, 100)
		if err != nil {
			return err
		}
		_, err = fmt.Fprint(stdout, storeTable(r))
		return err
	case "replicas":
		var o replicasOptions
		fs.StringVar(&o.teamsbot, "teamsbot", "", "the teamsbot binary (required)")
		fs.StringVar(&o.database, "database", "", "a postgres:// URL of the server; the benchmark makes its own database there (required)")
		fs.IntVar(&o.rounds, "rounds", 3, "rounds of every target at every load")
		fs.DurationVar(&o.dur, "seconds", 3*time.Second, "length of one measurement")
		fs.StringVar(&o.out, "out", "", "write the Markdown results here too")
		fs.StringVar(&o.dir, "dir", "", "working folder (default: a new temporary one)")
		if err := fs.Parse(args[2:]); err != nil {
			return err
		}
		if o.teamsbot == "" || o.database == "" {
			return errors.New("replicas: -teamsbot and -database are required")
		}
		return replicas(ctx, o, stdout, stderr)
	case "streams":
		var o streamsOptions
		fs.StringVar(&o.teamsbot, "teamsbot", "", "the teamsbot binary (required)")
		fs.IntVar(&o.turns, "turns", 10_000, "turns in flight at once")
		fs.IntVar(&o.chats, "chats", 1_000, "personal chats they come from")
		fs.IntVar(&o.tenants, "tenants", 100, "tenants the chats are in")
		fs.StringVar(&o.out, "out", "", "write the Markdown results here too")
		fs.StringVar(&o.dir, "dir", "", "working folder (default: a new temporary one)")
		fs.BoolVar(&o.profile, "profile", false, "save the service's heap, allocation and goroutine profiles at the model's peak to the working folder")
		fs.IntVar(&o.serviceNice, "service-nice", 0, "start the service under nice(1) with this increment over the load's niceness (0: as the load)")
		fs.StringVar(&o.goMemLimit, "gomemlimit", "", "the service's GOMEMLIMIT (Go's soft memory limit, e.g. 600MiB; default: none)")
		if err := fs.Parse(args[2:]); err != nil {
			return err
		}
		if o.teamsbot == "" {
			return errors.New("streams: -teamsbot is required")
		}
		return streams(ctx, o, stdout, stderr)
	case "side-by-side":
		var o sideOptions
		fs.StringVar(&o.teamsbot, "teamsbot", "", "the teamsbot binary (required)")
		fs.StringVar(&o.node, "node", "node", "Node.js")
		fs.StringVar(&o.botbuilder, "botbuilder", "", "the botbuilder reference bot script (required)")
		fs.IntVar(&o.rounds, "rounds", 3, "rounds of every target at every load")
		fs.DurationVar(&o.dur, "seconds", 3*time.Second, "length of one measurement")
		fs.IntVar(&o.views, "views", 1_000_000, "views in the store measurement (0: skip it)")
		fs.StringVar(&o.out, "out", "", "write the Markdown results here too")
		fs.StringVar(&o.dir, "dir", "", "working folder (default: a new temporary one)")
		fs.BoolVar(&o.profile, "profile", false, "write CPU profiles of the service's last round to the working folder (cpu-*.pprof)")
		if err := fs.Parse(args[2:]); err != nil {
			return err
		}
		if o.teamsbot == "" || o.botbuilder == "" {
			return errors.New("side-by-side: -teamsbot and -botbuilder are required")
		}
		self, err := os.Executable()
		if err != nil {
			return fmt.Errorf("own path: %w", err)
		}
		o.self = self
		return sideBySide(ctx, o, stdout, stderr)
	default:
		return fmt.Errorf("unknown command %q", args[1])
	}
}
