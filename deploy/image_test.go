package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// maxImageBytes bounds the image, uncompressed. It is the static binary
// (about 74 MB) with room to grow; past it, something that does not belong
// got in (symbols, a test tool, a second copy).
const maxImageBytes = 96 << 20

// TestImage builds the image with deploy/image.sh as written, offline, and
// checks it as whoever ships it would: its user, entry point, volume,
// ports and settings, the same as the Containerfile's (so that Docker's
// build and this one describe one image) and deploy/image.env's; every
// file in it; its size. Then it runs it, with podman where this machine
// lets podman run containers, and otherwise from the image's own exported
// file system, as the image's user, the root read-only, no capabilities:
// the version, a refused setting, health and readiness, the playground's
// answer, and an orderly stop on SIGTERM within the grace period.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the static binary and the container image, and runs it")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is missing: ./test.sh installs Debian's podman (apt-get install podman)")
	}
	img, err := ImageFacts()
	if err != nil {
		t.Fatal(err)
	}
	pm := newPodman(t)

	version := strings.TrimSpace(string(runOut(t, exec.Command("./rootfs.sh", "--version"))))
	built := time.Now()
	build := exec.Command("./image.sh")
	// The defaults are under test: no IMAGE or VERSION of this shell.
	build.Env = slices.DeleteFunc(slices.Clone(pm.env), func(kv string) bool {
		return strings.HasPrefix(kv, "IMAGE=") || strings.HasPrefix(kv, "VERSION=")
	})
	out := runOut(t, build)
	image := lastLine(out)
	if want := "localhost/teamsbot:" + version; image != want {
		t.Fatalf("deploy/image.sh built %q, want %q (IMAGE unset)", image, want)
	}
	t.Logf("deploy/image.sh built %s in %s", image, time.Since(built).Round(time.Second))

	cfg := pm.config(t, image)
	checkConfig(t, img, cfg, version)
	checkContainerfile(t, cfg)

	oci := t.TempDir()
	pm.run(t, "save", "--format", "oci-dir", "-o", oci, image)
	files := readLayers(t, oci)
	checkContents(t, img, files)

	rn := pickRunner(t, pm, img, image, files, version)
	checkRuns(t, rn, img)
}

// lastLine is the last line of a command's output.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// runOut runs a command in this folder and returns its standard output;
// its standard error is shown when it fails.
func runOut(t *testing.T, cmd *exec.Cmd) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s%s", strings.Join(cmd.Args, " "), err, out, stderr.Bytes())
	}
	return out
}

// podman is podman with its storage, its state and its containers.conf in
// a temporary folder of the test: the tests never touch the machine's
// images. The storage driver is vfs, which works on every file system and
// inside another container; the image is one layer, so it costs nothing.
type podman struct {
	env []string
}

func newPodman(t *testing.T) *podman {
	dir := t.TempDir()
	storage := filepath.Join(dir, "storage.conf")
	conf := filepath.Join(dir, "containers.conf")
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(storage, fmt.Sprintf("[storage]\ndriver = \"vfs\"\ngraphroot = %q\nrunroot = %q\n",
		filepath.Join(dir, "graph"), filepath.Join(dir, "run")))
	// cgroupfs and a log file: nothing here asks systemd.
	write(conf, fmt.Sprintf("[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\ntmp_dir = %q\n",
		filepath.Join(dir, "tmp")))
	p := &podman{env: append(os.Environ(), "CONTAINERS_STORAGE_CONF="+storage, "CONTAINERS_CONF="+conf)}
	if os.Geteuid() != 0 {
		// Rootless storage holds files of other ids, which only podman's
		// user namespace may remove.
		t.Cleanup(func() { _ = p.cmd("unshare", "rm", "-rf", filepath.Join(dir, "graph")).Run() })
	}
	return p
}

func (p *podman) cmd(args ...string) *exec.Cmd {
	cmd := exec.Command("podman", args...)
	cmd.Env = p.env
	return cmd
}

// run runs podman and returns its standard output; it fails the test when
// podman fails.
func (p *podman) run(t *testing.T, args ...string) []byte {
	t.Helper()
	return runOut(t, p.cmd(args...))
}

// imageConfig is what podman image inspect says of an image.
type imageConfig struct {
	Size   int64
	Config struct {
		User         string
		ExposedPorts map[string]struct{}
		Env          []string
		Entrypoint   []string
		Cmd          []string
		Volumes      map[string]struct{}
		Labels       map[string]string
		StopSignal   string
		WorkingDir   string
	}
	RootFS struct{ Layers []string }
}

func (p *podman) config(t *testing.T, image string) imageConfig {
	t.Helper()
	var cfgs []imageConfig
	if err := json.Unmarshal(p.run(t, "image", "inspect", image), &cfgs); err != nil || len(cfgs) != 1 {
		t.Fatalf("podman image inspect: %v (%d images)", err, len(cfgs))
	}
	return cfgs[0]
}

// The default PATH that podman, buildah and Docker all give an image
// built from scratch; nothing in the image uses it.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// checkConfig holds the image's configuration to deploy/image.env.
func checkConfig(t *testing.T, img Image, cfg imageConfig, version string) {
	t.Helper()
	c := cfg.Config
	if want := fmt.Sprintf("%d:%d", img.UID, img.GID); c.User != want {
		t.Errorf("the image runs as %q, want %q (a number, so that a runtime can tell it is not root)", c.User, want)
	}
	if !slices.Equal(c.Entrypoint, []string{img.Entrypoint}) || !slices.Equal(c.Cmd, []string{img.Cmd}) {
		t.Errorf("entry point %q and command %q, want [%s] [%s]", c.Entrypoint, c.Cmd, img.Entrypoint, img.Cmd)
	}
	if got := slices.Sorted(maps.Keys(c.Volumes)); !slices.Equal(got, []string{img.Data}) {
		t.Errorf("volumes %q, want the one %s", got, img.Data)
	}
	wantPorts := []string{fmt.Sprintf("%d/tcp", img.Port), fmt.Sprintf("%d/tcp", img.MetricsPort)}
	slices.Sort(wantPorts)
	if got := slices.Sorted(maps.Keys(c.ExposedPorts)); !slices.Equal(got, wantPorts) {
		t.Errorf("ports %q, want %q", got, wantPorts)
	}
	var wantEnv []string
	for k, v := range img.Env() {
		wantEnv = append(wantEnv, k+"="+v)
	}
	wantEnv = append(wantEnv, defaultPath)
	slices.Sort(wantEnv)
	if got := slices.Sorted(slices.Values(c.Env)); !slices.Equal(got, wantEnv) {
		t.Errorf("environment %q, want %q", got, wantEnv)
	}
	if c.StopSignal != "SIGTERM" {
		t.Errorf("stop signal %q, want SIGTERM", c.StopSignal)
	}
	if got := c.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("version label %q, want %q", got, version)
	}
	if len(cfg.RootFS.Layers) != 1 {
		t.Errorf("%d layers, want one: no base image", len(cfg.RootFS.Layers))
	}
}

// instruction is one instruction of a Containerfile, its lines joined.
type instruction struct{ name, args string }

// readContainerfile returns the stages of a Containerfile, each a list of
// instructions starting with its FROM.
func readContainerfile(t *testing.T, path string) [][]instruction {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]instruction
	var cur strings.Builder
	for line := range strings.SplitSeq(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if rest, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(trimmed)
		name, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{strings.ToUpper(name), strings.TrimSpace(args)}
		if in.name == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
	}
	return stages
}

// checkContainerfile holds the Containerfile that Docker builds to the
// image deploy/image.sh built: its final stage is FROM scratch, copies the
// first stage's file system, which deploy/rootfs.sh makes as it does for
// deploy/image.sh, and says what the image says.
func checkContainerfile(t *testing.T, cfg imageConfig) {
	t.Helper()
	stages := readContainerfile(t, "../Containerfile")
	if len(stages) != 2 {
		t.Fatalf("the Containerfile has %d stages, want the rootfs stage and the image", len(stages))
	}
	first, final := stages[0], stages[1]
	if !strings.HasSuffix(first[0].args, " AS rootfs") ||
		!slices.ContainsFunc(first, func(in instruction) bool {
			return in.name == "RUN" && strings.Contains(in.args, "deploy/rootfs.sh /tmp/rootfs.tar")
		}) {
		t.Errorf("the Containerfile's first stage is not rootfs, or does not run deploy/rootfs.sh: %q", first)
	}
	if final[0].args != "scratch" {
		t.Errorf("the image is FROM %s, want scratch", final[0].args)
	}
	said := map[string]string{}
	for _, in := range final[1:] {
		switch in.name {
		case "ARG", "LABEL":
		case "COPY":
			if in.args != "--from=rootfs /rootfs/ /" {
				t.Errorf("the image copies %q, want only the rootfs stage's file system", in.args)
			}
		default:
			if _, twice := said[in.name]; twice {
				t.Errorf("the final stage has %s twice", in.name)
			}
			said[in.name] = in.args
		}
	}
	c := cfg.Config
	jsonList := func(s []string) string { b, _ := json.Marshal(s); return string(b) }
	var env []string
	for _, kv := range c.Env {
		if kv != defaultPath {
			k, v, _ := strings.Cut(kv, "=")
			env = append(env, k+"="+strconv.Quote(v))
		}
	}
	var ports []string
	for _, p := range slices.Sorted(maps.Keys(c.ExposedPorts)) {
		ports = append(ports, strings.TrimSuffix(p, "/tcp"))
	}
	want := map[string]string{
		"USER":       c.User,
		"VOLUME":     jsonList(slices.Sorted(maps.Keys(c.Volumes))),
		"EXPOSE":     strings.Join(ports, " "),
		"ENV":        strings.Join(env, " "),
		"STOPSIGNAL": c.StopSignal,
		"ENTRYPOINT": jsonList(c.Entrypoint),
		"CMD":        jsonList(c.Cmd),
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if said[name] != want[name] {
			t.Errorf("the Containerfile says %s %s, the image deploy/image.sh built %s %s", name, said[name], name, want[name])
		}
	}
	for name := range said {
		if _, ok := want[name]; !ok {
			t.Errorf("the Containerfile's final stage has %s, which this test does not compare", name)
		}
	}
}

// entry is one file of the image.
type entry struct {
	typ      byte
	mode     fs.FileMode
	uid, gid int
	data     []byte // regular files
}

// layers is the image's file system, read from its exported layers, and
// their sizes.
type layers struct {
	files                 map[string]entry
	tarBytes, storedBytes int64
	whiteouts             []string
}

// readLayers reads the layers of the one image in an OCI image folder
// (podman save --format oci-dir): every entry, and the layers' sizes as
// stored (compressed) and as tar.
func readLayers(t *testing.T, dir string) layers {
	t.Helper()
	blob := func(digest string) string {
		algo, hex, _ := strings.Cut(digest, ":")
		return filepath.Join(dir, "blobs", algo, hex)
	}
	readJSON := func(path string, v any) {
		raw, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(raw, v)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var index struct{ Manifests []struct{ Digest string } }
	readJSON(filepath.Join(dir, "index.json"), &index)
	if len(index.Manifests) != 1 {
		t.Fatalf("%d manifests in the saved image", len(index.Manifests))
	}
	var manifest struct {
		Layers []struct {
			Digest string
			Size   int64
		}
	}
	readJSON(blob(index.Manifests[0].Digest), &manifest)
	l := layers{files: map[string]entry{}}
	for _, layer := range manifest.Layers {
		f, err := os.Open(blob(layer.Digest))
		if err != nil {
			t.Fatal(err)
		}
		l.storedBytes += layer.Size
		br := bufio.NewReader(f)
		var r io.Reader = br
		if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
			if r, err = gzip.NewReader(br); err != nil {
				t.Fatal(err)
			}
		}
		counted := &countingReader{r: r}
		tr := tar.NewReader(counted)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("layer %s: %v", layer.Digest, err)
			}
			name := strings.TrimSuffix(path.Clean("/"+h.Name), "/")
			if strings.HasPrefix(path.Base(name), ".wh.") {
				l.whiteouts = append(l.whiteouts, name)
				continue
			}
			e := entry{typ: h.Typeflag, mode: fs.FileMode(h.Mode).Perm(), uid: h.Uid, gid: h.Gid}
			if h.Typeflag == tar.TypeReg {
				if e.data, err = io.ReadAll(tr); err != nil {
					t.Fatal(err)
				}
			}
			if name != "" {
				l.files[name] = e
			}
		}
		_, _ = io.Copy(io.Discard, counted)
		l.tarBytes += counted.n
		f.Close()
	}
	return l
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// checkContents holds every file of the image to what it must hold: the
// static binary; this machine's CA certificates;
// passwd and group with the one user; the volume's folder, the user's.
// Nothing else, and nothing but the folder is the user's.
func checkContents(t *testing.T, img Image, l layers) {
	t.Helper()
	certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatalf("the build machine's CA certificates: %v", err)
	}
	type want struct {
		typ      byte
		mode     fs.FileMode
		uid, gid int
		data     []byte // nil: not compared here
	}
	dir := func(mode fs.FileMode) want { return want{typ: tar.TypeDir, mode: mode} }
	file := func(mode fs.FileMode, data []byte) want { return want{typ: tar.TypeReg, mode: mode, data: data} }
	wants := map[string]want{
		"/etc":                               dir(0o755),
		"/etc/ssl":                           dir(0o755),
		"/etc/ssl/certs":                     dir(0o755),
		"/etc/ssl/certs/ca-certificates.crt": file(0o444, certs),
		"/etc/passwd":                        file(0o444, fmt.Appendf(nil, "%s:x:%d:%d::%s:/sbin/nologin\n", img.User, img.UID, img.GID, img.Data)),
		"/etc/group":                         file(0o444, fmt.Appendf(nil, "%s:x:%d:\n", img.User, img.GID)),
		img.Entrypoint:                       {typ: tar.TypeReg, mode: 0o555},
		img.Data:                             {typ: tar.TypeDir, mode: 0o700, uid: img.UID, gid: img.GID},
	}
	for _, name := range slices.Sorted(maps.Keys(l.files)) {
		got := l.files[name]
		w, ok := wants[name]
		switch {
		case !ok:
			t.Errorf("the image holds %s, which does not belong in it", name)
		case got.typ != w.typ || got.mode != w.mode || got.uid != w.uid || got.gid != w.gid:
			t.Errorf("%s: type %c mode %v owner %d:%d, want type %c mode %v owner %d:%d", name, got.typ, got.mode, got.uid, got.gid, w.typ, w.mode, w.uid, w.gid)
		case w.data != nil && !bytes.Equal(got.data, w.data):
			t.Errorf("%s holds %.200q, want %.200q", name, got.data, w.data)
		}
	}
	for name := range wants {
		if _, ok := l.files[name]; !ok {
			t.Errorf("the image has no %s", name)
		}
	}
	if len(l.whiteouts) > 0 {
		t.Errorf("the image deletes files of a base it must not have: %q", l.whiteouts)
	}
	t.Logf("image size: %d bytes as tar (%.1f MB), %d bytes compressed as stored and pushed (%.1f MB)",
		l.tarBytes, float64(l.tarBytes)/1e6, l.storedBytes, float64(l.storedBytes)/1e6)
	if l.tarBytes > maxImageBytes {
		t.Errorf("the image is %d bytes, more than the %d this test allows: what grew it?", l.tarBytes, maxImageBytes)
	}

	bin := l.files[img.Entrypoint].data
	exe, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("%s is no ELF program: %v", img.Entrypoint, err)
	}
	for _, p := range exe.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s is linked dynamically (%v): the image has no C library", img.Entrypoint, p.Type)
		}
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("%s: %v", img.Entrypoint, err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" {
		t.Errorf("%s was built with CGO_ENABLED=%q, want 0", img.Entrypoint, settings["CGO_ENABLED"])
	}
	// With -trimpath, Go does not record -ldflags: the version the
	// program prints is checked when it runs (pickRunner).
	if settings["-trimpath"] != "true" {
		t.Errorf("%s was built without -trimpath", img.Entrypoint)
	}
}

// TestDocumentedRunsAreLockedDown holds every podman run and docker run of
// docs/container.md to what TestImage runs the image with: the root
// read-only, every capability dropped, no new privileges, a volume at the
// data folder.
func TestDocumentedRunsAreLockedDown(t *testing.T) {
	img, err := ImageFacts()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../docs/container.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.ReplaceAll(string(raw), "\\\n", " ")
	runs := regexp.MustCompile(`(?m)^\s*(podman|docker) run .*$`).FindAllString(doc, -1)
	if len(runs) < 2 {
		t.Fatalf("docs/container.md shows %d runs, want podman's and Docker's", len(runs))
	}
	volume := regexp.MustCompile(`(?:-v|--volume)[ =]\S+:` + regexp.QuoteMeta(img.Data) + `(\s|$)`)
	for _, run := range runs {
		for _, flag := range []string{"--read-only", "--cap-drop=ALL", "--security-opt=no-new-privileges"} {
			if !slices.Contains(strings.Fields(run), flag) {
				t.Errorf("docs/container.md runs the image without %s: %s", flag, strings.TrimSpace(run))
			}
		}
		if !volume.MatchString(run) {
			t.Errorf("docs/container.md runs the image without a volume at %s: %s", img.Data, strings.TrimSpace(run))
		}
	}
}
