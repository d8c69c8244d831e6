package store_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"teamsbot/store"
)

// writerEnv makes the test binary a writer of runs and views into the
// store file it names, instead of running tests: the kill -9 test starts
// it as a child and kills it while it writes.
const writerEnv = "STORE_TEST_WRITER"

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		if err := writeForever(path, os.Getenv(writerEnv+"_ROUND")); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writeForever saves runs with one view each from four goroutines (so
// that commits are shared, as the service's turns share them), and prints
// "saved <view id>" once SaveRun has returned: the moment the service
// would send the card that names the view.
func writeForever(path, round string) error {
	ctx := context.Background()
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		return err
	}
	var out sync.Mutex
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			for i := 0; ; i++ {
				id := fmt.Sprintf("r%s-w%d-v%d", round, w, i)
				v := sampleView(id, time.Now(), store.ViewLifetime)
				html := []byte(fmt.Sprintf("<!doctype html><p>%s %s</p>", id, strings.Repeat("x", i%4096)))
				run := store.Run{ID: "run-" + id, AgentID: "default", TenantID: "tenant-1", UserID: "user-1", Text: "answer", CreatedAt: time.Now()}
				if err := st.SaveRun(ctx, run, []store.NewView{{View: v, HTML: html}}, nil); err != nil {
					errs <- err
					return
				}
				out.Lock()
				fmt.Fprintln(os.Stdout, "saved", id)
				out.Unlock()
			}
		}()
	}
	return <-errs
}

// A writer killed with SIGKILL while it saves views loses none whose save
// returned (whose card would have been sent), and the file opens cleanly
// each time, three rounds on the same file.
func TestKill9WhileViewsAreWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	var saved []string
	for round := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), writerEnv+"="+path, fmt.Sprintf("%s_ROUND=%d", writerEnv, round))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			id, ok := strings.CutPrefix(sc.Text(), "saved ")
			if !ok {
				continue
			}
			saved = append(saved, id)
			// Kill at a different moment each round, mid-stream.
			if n++; n == 150+round*37 {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
		err = cmd.Wait()
		cancel()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("round %d: the writer ended with %v, not SIGKILL", round, err)
		}

		st, err := store.Open(context.Background(), path, store.Options{OpenTimeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("round %d: the file does not open after kill -9: %v", round, err)
		}
		for _, id := range saved {
			if _, err := st.View(context.Background(), id); err != nil {
				t.Errorf("round %d: view %s was saved before the kill, now: %v", round, id, err)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d views saved across 3 kills, all there", len(saved))
}

// A full disk, made real with a small tmpfs (this needs root; elsewhere
// the test is skipped): SaveRun fails with a clear error that says the
// disk is full, nothing saved before is lost, the file still opens, and
// saving works again once there is space.
func TestFullDiskThenSpaceReturns(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("cannot mount a small tmpfs here (%v): the full-disk test needs root", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	path := filepath.Join(dir, "teamsbot.db")
	ctx := context.Background()
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	save := func(i int) error {
		id := fmt.Sprintf("full-%d", i)
		// Distinct HTML each time: HTML is kept once per SHA-256.
		html := []byte(fmt.Sprintf("<!doctype html><p>%d</p>%s", i, strings.Repeat("y", 64<<10)))
		run := store.Run{ID: "run-" + id, AgentID: "default", TenantID: "tenant-1", UserID: "user-1", Text: "answer", CreatedAt: time.Now()}
		return st.SaveRun(ctx, run, []store.NewView{{View: sampleView(id, time.Now(), store.ViewLifetime), HTML: html}}, nil)
	}
	var saved []string
	var full error
	for i := 0; i < 200; i++ {
		if err := save(i); err != nil {
			full = err
			break
		}
		saved = append(saved, fmt.Sprintf("full-%d", i))
	}
	if full == nil {
		t.Fatal("200 views of 64 KiB fit in 2 MiB")
	}
	if !errors.Is(full, syscall.ENOSPC) || !strings.Contains(full.Error(), "no space left") {
		t.Errorf("the error of a full disk = %v, want one that says so (ENOSPC)", full)
	}
	if len(saved) == 0 {
		t.Fatal("nothing was saved before the disk was full")
	}
	// The store still answers, and what was saved is there.
	for _, id := range saved {
		if _, err := st.View(ctx, id); err != nil {
			t.Errorf("view %s, saved before the disk was full: %v", id, err)
		}
	}
	if err := st.Close(); err != nil {
		t.Logf("Close on a full disk: %v", err)
	}
	// Space returns: the file opens cleanly, holds every saved view, and
	// takes new ones.
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatalf("remount with more space: %v", err)
	}
	st, err = store.Open(ctx, path, store.Options{OpenTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("the file does not open after the disk was full: %v", err)
	}
	defer st.Close()
	for _, id := range saved {
		if _, err := st.View(ctx, id); err != nil {
			t.Errorf("view %s after space returned: %v", id, err)
		}
	}
	for i := 1000; i < 1010; i++ {
		if err := save(i); err != nil {
			t.Fatalf("save after space returned: %v", err)
		}
	}
	t.Logf("%d views saved before the disk was full: %v", len(saved), full)
}
