package deploy

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"teamsbot/internal/testenv"
	"teamsbot/signin"
)

// gracePeriod is how long a container runtime waits after SIGTERM before it
// kills (Kubernetes' default, and podman stop's --time here).
const gracePeriod = 30 * time.Second

// TestMain is also the fallback's runner: started with sandboxVar set, the
// test binary becomes the image's program in a sandbox (see sandbox).
func TestMain(m *testing.M) {
	if spec := os.Getenv(sandboxVar); spec != "" {
		sandbox(spec)
	}
	os.Exit(m.Run())
}

// runner starts the image's program as a container would.
type runner interface {
	// start runs the image with its command (args, or the image's when
	// empty) and env added to the image's environment.
	start(t *testing.T, env map[string]string, args ...string) *process
	// stop asks the program to stop, as a runtime does (SIGTERM).
	stop(t *testing.T, p *process)
	// data is the host's folder of the volume of p.
	data(t *testing.T, p *process) string
	name() string
}

// process is the image's program running.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *testenv.LogBuffer
	done           chan struct{}
	err            error // cmd.Wait's, once done is closed
	started        time.Time
	// pid is the program's process id on this machine (found by pidOf).
	pidOf func() int
	// name and volume are the runner's names for the container and its
	// volume.
	name, volume string
}

func startProcess(t *testing.T, cmd *exec.Cmd) *process {
	t.Helper()
	p := &process{cmd: cmd, stdout: &testenv.LogBuffer{}, stderr: &testenv.LogBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// wait waits for the program's end, up to d, and returns its exit code
// (-1 when it did not end).
func (p *process) wait(d time.Duration) int {
	select {
	case <-p.done:
	case <-time.After(d):
		return -1
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// pickRunner runs the image's version command with podman, locked down as
// docs/container.md runs it. When that works, podman runs every check;
// when podman's runtime cannot start a container on this machine (the
// failure says so: crun may not set rlimits in a sandboxed machine), the
// fallback runs the image's own exported file system instead. A failure of
// the program itself fails the test.
func pickRunner(t *testing.T, pm *podman, img Image, image string, l layers, version string) runner {
	t.Helper()
	want := "teamsbot " + version + "\n"
	pr := &podmanRunner{pm: pm, image: image}
	p := pr.start(t, nil, "version")
	code := p.wait(time.Minute)
	out := p.stdout.String() + p.stderr.String()
	if code == 0 {
		if p.stdout.String() != want {
			t.Errorf("teamsbot version printed %q, want %q", p.stdout.String(), want)
		}
		return pr
	}
	// podman's own failures are 125, a command that cannot be invoked
	// 126; the program's are 1 and 2.
	runtimeFailed := (code == 125 || code == 126) && regexp.MustCompile(`OCI (runtime error|permission denied)`).MatchString(out)
	if !runtimeFailed {
		t.Fatalf("podman run %s version: exit %d\n%s", image, code, out)
	}
	t.Logf("podman cannot run containers here (exit %d: %s); the image's exported file system runs instead, as its user, the root read-only, no capabilities", code, strings.TrimSpace(out))
	if os.Geteuid() != 0 {
		t.Fatal("the fallback needs root (a mount namespace, chroot, another user)")
	}
	sr := &sandboxRunner{img: img, root: unpack(t, l)}
	p = sr.start(t, nil, "version")
	if code := p.wait(time.Minute); code != 0 || p.stdout.String() != want {
		t.Fatalf("teamsbot version: exit %d, printed %q, want %q\n%s", code, p.stdout.String(), want, p.stderr)
	}
	return sr
}

// podmanRunner runs the image with podman, as docs/container.md does: the
// root read-only, every capability dropped, no new privileges, a named
// volume at the data folder. The network is the host's, so that the
// listener is on loopback, where the playground runs.
type podmanRunner struct {
	pm    *podman
	image string
}

func (r *podmanRunner) name() string { return "podman" }

func (r *podmanRunner) start(t *testing.T, env map[string]string, args ...string) *process {
	t.Helper()
	id := randomID(t)
	name, volume := "teamsbot-test-"+id, "teamsbot-test-data-"+id
	run := []string{"run", "--name", name, "--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges",
		"--network=host", "-v", volume + ":/data"}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		run = append(run, "-e", k+"="+env[k])
	}
	run = append(append(run, r.image), args...)
	t.Cleanup(func() {
		_ = r.pm.cmd("rm", "--force", "--time", "0", name).Run()
		_ = r.pm.cmd("volume", "rm", "--force", volume).Run()
	})
	p := startProcess(t, r.pm.cmd(run...))
	p.name, p.volume = name, volume
	p.pidOf = func() int {
		out, err := r.pm.cmd("inspect", "--format", "{{.State.Pid}}", name).Output()
		if err != nil {
			return 0
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		return pid
	}
	return p
}

func (r *podmanRunner) stop(t *testing.T, p *process) {
	t.Helper()
	// podman stop sends the image's stop signal and waits the grace
	// period before it kills; the end is awaited on p.
	go func() {
		_ = r.pm.cmd("stop", "--time", strconv.Itoa(int(gracePeriod.Seconds())), p.name).Run()
	}()
}

func (r *podmanRunner) data(t *testing.T, p *process) string {
	t.Helper()
	return strings.TrimSpace(string(r.pm.run(t, "volume", "inspect", "--format", "{{.Mountpoint}}", p.volume)))
}

// unpack writes the image's file system, from its exported layers, into a
// new folder, with its owners and modes.
func unpack(t *testing.T, l layers) string {
	t.Helper()
	root := t.TempDir()
	// The image's root is open to all, as a runtime's is.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range slices.Sorted(maps.Keys(l.files)) {
		e := l.files[name]
		dst := filepath.Join(root, name)
		var err error
		switch e.typ {
		case tar.TypeDir:
			err = os.Mkdir(dst, e.mode)
		case tar.TypeReg:
			err = os.WriteFile(dst, e.data, e.mode)
		default:
			err = fmt.Errorf("type %c", e.typ)
		}
		if err == nil {
			err = os.Chmod(dst, e.mode) // whatever the umask
		}
		if err == nil {
			err = os.Lchown(dst, e.uid, e.gid)
		}
		if err != nil {
			t.Fatalf("unpacking %s: %v", name, err)
		}
	}
	return root
}

// sandboxVar carries a sandboxSpec to the test binary started as the
// fallback's runner.
const sandboxVar = "TEAMSBOT_IMAGE_SANDBOX"

// sandboxSpec is what the fallback runs: the image's program, in its file
// system, as its user, with its volume.
type sandboxSpec struct {
	Root, Data, Volume string
	UID, GID           int
	Args, Env          []string
}

// sandboxRunner runs the image's exported file system as a container
// runtime would, without one: in a mount namespace of its own, the
// unpacked root bind-mounted read-only with a writable folder at the
// volume, then chroot, no capabilities at all (the bounding set too), no
// new privileges, the image's user and group and no other group, and the
// image's environment.
type sandboxRunner struct {
	img  Image
	root string
}

func (r *sandboxRunner) name() string { return "the exported file system" }

func (r *sandboxRunner) start(t *testing.T, env map[string]string, args ...string) *process {
	t.Helper()
	// A new volume starts as the image's folder: its owner and mode.
	data := filepath.Join(t.TempDir(), "data")
	vol := filepath.Join(r.root, r.img.Data)
	fi, err := os.Stat(vol)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if err := os.Mkdir(data, fi.Mode().Perm()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, int(st.Uid), int(st.Gid)); err != nil {
		t.Fatal(err)
	}
	if len(args) == 0 {
		args = []string{r.img.Cmd}
	}
	spec := sandboxSpec{Root: r.root, Data: data, Volume: r.img.Data, UID: r.img.UID, GID: r.img.GID,
		Args: append([]string{r.img.Entrypoint}, args...), Env: []string{defaultPath}}
	merged := r.img.Env()
	maps.Copy(merged, env)
	for _, k := range slices.Sorted(maps.Keys(merged)) {
		spec.Env = append(spec.Env, k+"="+merged[k])
	}
	raw, _ := json.Marshal(spec)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = []string{sandboxVar + "=" + string(raw)}
	// Go makes the new namespace's mounts private: nothing mounted there
	// shows on this machine.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	p := startProcess(t, cmd)
	p.volume = data
	p.pidOf = func() int { return cmd.Process.Pid }
	return p
}

func (r *sandboxRunner) stop(t *testing.T, p *process) {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Error(err)
	}
}

func (r *sandboxRunner) data(t *testing.T, p *process) string { return p.volume }

// Linux's prctl options, which package syscall does not name.
const (
	prSetNoNewPrivs = 38
	prCapbsetDrop   = 24
)

// sandbox becomes the image's program as sandboxRunner describes; it never
// returns. It runs as root in a new mount namespace, on one locked thread:
// the bounding set and no_new_privs belong to the thread that execs.
func sandbox(raw string) {
	runtime.LockOSThread()
	fail := func(step string, err error) {
		fmt.Fprintf(os.Stderr, "sandbox: %s: %v\n", step, err)
		os.Exit(125)
	}
	var s sandboxSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fail("spec", err)
	}
	vol := filepath.Join(s.Root, s.Volume)
	for _, m := range []struct {
		what           string
		source, target string
		flags          uintptr
	}{
		{"bind the root", s.Root, s.Root, syscall.MS_BIND | syscall.MS_REC},
		{"make the root read-only", "", s.Root, syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_RDONLY | syscall.MS_NOSUID | syscall.MS_NODEV},
		{"bind the volume", s.Data, vol, syscall.MS_BIND},
		{"remount the volume", "", vol, syscall.MS_REMOUNT | syscall.MS_BIND | syscall.MS_NOSUID | syscall.MS_NODEV},
	} {
		if err := syscall.Mount(m.source, m.target, "", m.flags, ""); err != nil {
			fail(m.what, err)
		}
	}
	if err := syscall.Chroot(s.Root); err != nil {
		fail("chroot", err)
	}
	if err := syscall.Chdir("/"); err != nil {
		fail("chdir", err)
	}
	syscall.Umask(0o022)
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0); e != 0 {
		fail("no new privileges", e)
	}
	for c := uintptr(0); ; c++ {
		if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prCapbsetDrop, c, 0); e == syscall.EINVAL {
			break // past the last capability
		} else if e != 0 {
			fail("drop capability "+strconv.Itoa(int(c)), e)
		}
	}
	// Leaving root for another user clears the permitted, effective and
	// ambient capabilities.
	if err := syscall.Setgroups(nil); err != nil {
		fail("setgroups", err)
	}
	if err := syscall.Setgid(s.GID); err != nil {
		fail("setgid", err)
	}
	if err := syscall.Setuid(s.UID); err != nil {
		fail("setuid", err)
	}
	err := syscall.Exec(s.Args[0], s.Args, s.Env)
	fail("exec "+s.Args[0], err)
}

func randomID(t *testing.T) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// freePort is a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// checkRuns runs the image: a refused setting, then the service, its
// health and readiness, who it runs as, the playground's answer, and an
// orderly stop on SIGTERM.
func checkRuns(t *testing.T, rn runner, img Image) {
	t.Helper()
	t.Logf("running the image with %s", rn.name())

	bad := rn.start(t, map[string]string{"TICKETIQ_ADDR": "nonsense", "TICKETIQ_LISTEN": "nonsense"})
	code := bad.wait(time.Minute)
	if code != 1 || !strings.Contains(bad.stderr.String(), "TICKETIQ_ADDR: invalid address") ||
		!strings.Contains(bad.stderr.String(), "unknown setting TICKETIQ_LISTEN") {
		t.Errorf("with TICKETIQ_ADDR=nonsense and TICKETIQ_LISTEN=nonsense: exit %d, want 1 and both named:\n%s", code, bad.stderr)
	}

	// Loopback listeners: the playground runs in local mode only.
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	internal := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	p := rn.start(t, map[string]string{"TICKETIQ_ADDR": addr, "TICKETIQ_METRICS_ADDR": internal})
	c := &http.Client{Timeout: 10 * time.Second}
	listening := waitFor(t, p, c, "http://"+addr+"/healthz", "ok\n")
	ready := waitFor(t, p, c, "http://"+internal+"/readyz", "ready\n")
	t.Logf("start: /healthz answered %s after the start, /readyz %s", listening.Round(time.Millisecond), ready.Round(time.Millisecond))
	if code, _ := get(c, "http://"+addr+"/readyz"); code != http.StatusNotFound {
		t.Errorf("/readyz on the main listener: %d, want 404 (it is the internal listener's)", code)
	}
	if code, body := get(c, "http://"+internal+"/metrics"); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d", code)
	}

	checkConfinement(t, p.pidOf(), img)
	askPlayground(t, c, "http://"+addr)

	stopping := time.Now()
	rn.stop(t, p)
	code = p.wait(gracePeriod)
	took := time.Since(stopping)
	if code != 0 {
		t.Fatalf("after SIGTERM: exit %d in %s, want 0 within %s\n%s", code, took.Round(time.Millisecond), gracePeriod, p.stderr)
	}
	t.Logf("stop: exit 0 %s after SIGTERM", took.Round(time.Millisecond))
	lines := strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last["msg"] != "stopped" {
		t.Errorf("the log ends with %s, want the stop line", lines[len(lines)-1])
	}
	if !strings.Contains(p.stderr.String(), `"msg":"shutting down"`) {
		t.Errorf("no shutdown logged:\n%s", p.stderr)
	}

	// The data is on the volume, the user's.
	dir := rn.data(t, p)
	for _, name := range []string{"teamsbot.db", "signin-cookie.key", "frame-token-keys.json"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("the volume has no %s: %v", name, err)
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != img.UID || int(st.Gid) != img.GID {
			t.Errorf("%s on the volume belongs to %d:%d, want %d:%d", name, st.Uid, st.Gid, img.UID, img.GID)
		}
	}
}

func get(c *http.Client, u string) (int, string) {
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitFor waits until u answers 200 with body, and returns how long after
// the start it did.
func waitFor(t *testing.T, p *process, c *http.Client, u, body string) time.Duration {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if code, got := get(c, u); code == http.StatusOK && got == body {
			return time.Since(p.started)
		}
		select {
		case <-p.done:
			t.Fatalf("it ended before %s answered (%v):\n%s%s", u, p.err, p.stdout, p.stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not answer %q within a minute:\n%s", u, body, p.stderr)
	return 0
}

// checkConfinement reads, on this machine, who the program runs as and
// what it may do: the image's user and group and no other group, no
// capability in any set, no new privileges, the root read-only and the
// volume writable.
func checkConfinement(t *testing.T, pid int, img Image) {
	t.Helper()
	if pid <= 0 {
		t.Fatal("the program's process id is not known")
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	fields := map[string]string{}
	for line := range strings.SplitSeq(string(status), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	uid, gid := strconv.Itoa(img.UID), strconv.Itoa(img.GID)
	want := map[string]string{
		"Uid":    strings.Repeat(uid+" ", 3) + uid,
		"Gid":    strings.Repeat(gid+" ", 3) + gid,
		"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
		"NoNewPrivs": "1",
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if fields[k] != want[k] {
			t.Errorf("the program's %s is %q, want %q", k, fields[k], want[k])
		}
	}
	// No group but the image's (podman lists it again as a supplementary
	// one; the fallback leaves none).
	if g := fields["Groups"]; g != "" && g != gid {
		t.Errorf("the program's supplementary groups are %q, want none but %s", g, gid)
	}
	mounts, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	opts := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(mounts)), "\n") {
		// id parent major:minor root mountpoint options ...
		if f := strings.Fields(line); len(f) > 5 {
			opts[f[4]] = f[5]
		}
	}
	has := func(options, o string) bool { return slices.Contains(strings.Split(options, ","), o) }
	if !has(opts["/"], "ro") {
		t.Errorf("the root is mounted %q, want read-only", opts["/"])
	}
	if !has(opts[img.Data], "rw") {
		t.Errorf("the volume %s is mounted %q, want writable", img.Data, opts[img.Data])
	}
}

// askPlayground asks the bot the demo's sales report in the playground, as
// the page does, and waits for its answer: a card that names the view.
func askPlayground(t *testing.T, c *http.Client, base string) {
	t.Helper()
	person := signin.LocalPeople()[0]
	who := map[string]string{"tenant": signin.LocalTenant, "user": person.UserID, "name": person.Name, "kind": "personal"}
	msg := maps.Clone(who)
	msg["text"] = "/sales_report {}"
	body, _ := json.Marshal(msg)
	resp, err := c.Post(base+"/playground/api/send", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(sent), `"delivered":true`) {
		t.Fatalf("the playground did not take the message: %d %s", resp.StatusCode, sent)
	}
	q := url.Values{}
	for k, v := range who {
		q.Set(k, v)
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var state struct {
			Items []struct {
				From        string            `json:"from"`
				Attachments []json.RawMessage `json:"attachments"`
				Views       []struct{ ID string }
			} `json:"items"`
		}
		resp, err := c.Get(base + "/playground/api/state?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&state)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range state.Items {
			if it.From == "bot" && len(it.Views) > 0 && len(it.Attachments) > 0 &&
				bytes.Contains(it.Attachments[0], []byte("Sales report")) {
				return
			}
		}
	}
	t.Fatal("the playground's answer, a card naming the Sales report view, did not come within a minute")
}
