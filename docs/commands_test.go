package docs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"teamsbot/internal/pgtest"
	"teamsbot/internal/testenv"
	"teamsbot/signin"
)

// command is one command of a fenced sh, bash or console block of a
// document.
type command struct {
	file  string // the document, from the repository's root
	line  int    // where the command starts
	block int    // which block of the document, from 0
	// text is the command as written: lines continued with \ or inside
	// quotes joined with their line breaks, comments cut.
	text string
	// output is, in a console block, what the document shows the command
	// print; nil elsewhere.
	output *string
}

// fencedCommands returns the commands of the fenced sh, bash, shell and
// console blocks of a document, in order.
func fencedCommands(t testing.TB, file, doc string) []command {
	t.Helper()
	var out []command
	lines := strings.Split(doc, "\n")
	block := -1
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimLeft(lines[i], " ")
		if !strings.HasPrefix(trimmed, "```") {
			continue
		}
		indent := len(lines[i]) - len(trimmed)
		lang := strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))
		var body []string
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			l := lines[i]
			if len(l) >= indent && strings.TrimSpace(l[:indent]) == "" {
				l = l[indent:]
			}
			body = append(body, l)
		}
		switch lang {
		case "sh", "bash", "shell":
			block++
			for _, c := range shellCommands(body) {
				out = append(out, command{file: file, line: start + c.line + 1, block: block, text: c.text})
			}
		case "console":
			block++
			var cur *command
			for n := 0; n < len(body); n++ {
				if rest, ok := strings.CutPrefix(body[n], "$ "); ok {
					// The command, with its continuation lines.
					text := rest
					for strings.HasSuffix(text, "\\") && n+1 < len(body) {
						n++
						text += "\n" + body[n]
					}
					empty := ""
					out = append(out, command{file: file, line: start + n + 1, block: block, text: text, output: &empty})
					cur = &out[len(out)-1]
					continue
				}
				if cur == nil {
					t.Errorf("%s:%d: a console block must start with a command ($ ...)", file, start+n)
					break
				}
				*cur.output += body[n] + "\n"
			}
		}
	}
	return out
}

// shellCommands splits a shell block into its commands: a newline outside
// quotes and not after a backslash ends one, and a # that starts a word
// outside quotes starts a comment.
func shellCommands(body []string) []struct {
	line int
	text string
} {
	var out []struct {
		line int
		text string
	}
	text := strings.Join(body, "\n") + "\n"
	var cur strings.Builder
	quote := rune(0)
	first, line := 0, 0
	comment := false
	prev := '\n'
	for _, r := range text {
		if r == '\n' {
			line++
		}
		switch {
		case comment:
			if r != '\n' {
				continue
			}
			comment = false
			fallthrough
		case r == '\n' && quote == 0 && prev != '\\':
			if s := strings.TrimSpace(cur.String()); s != "" {
				out = append(out, struct {
					line int
					text string
				}{first, s})
			}
			cur.Reset()
			prev = '\n'
			continue
		case quote == 0 && r == '#' && (prev == ' ' || prev == '\t' || prev == '\n'):
			comment = true
			continue
		case quote == 0 && (r == '\'' || r == '"'):
			quote = r
		case quote != 0 && r == quote && (quote == '\'' || prev != '\\'):
			quote = 0
		}
		if strings.TrimSpace(cur.String()) == "" && r != ' ' && r != '\n' {
			first = line
		}
		cur.WriteRune(r)
		prev = r
	}
	return out
}

var assignment = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

// program returns the command's words after its leading VAR=value
// assignments.
func program(text string) []string {
	w := testenv.ShellWords(text)
	for len(w) > 0 && assignment.MatchString(w[0]) {
		w = w[1:]
	}
	return w
}

// elsewhere lists the commands of the documents that this test does not
// run, each with why and what runs the same path instead. A command that
// is neither run here nor listed fails the test, and so does a listed one
// that no document shows any more.
var elsewhere = map[string]struct{ why, instead string }{
	"TEAMSBOT_UPDATE_SCREENSHOTS=1 go test ./cmd/teamsbot -run TestScreenshots": {
		"it rewrites the committed pictures in docs/screenshots/",
		"./test.sh's go test ./... runs cmd/teamsbot.TestScreenshots, the same service, pages and pictures, all but the write"},
	"go run ./bench/load store -dir /tmp/store1m -views 1000000": {
		"it writes 2.5 GB for half a minute",
		"./test.sh runs the same measurement (bench/load's benchStore) through bench/side-by-side.sh with VIEWS=2000"},
	"docker run --rm --name jaeger -p 16686:16686 -p 4318:4318 cr.jaegertracing.io/jaegertracing/jaeger:2.15.0": {
		"it needs Docker and Jaeger's image, which the machines that run the suite have neither of",
		"cmd/teamsbot.TestTracesOfOneTurnAndOneViewCall exports the service's spans to an OTLP/HTTP receiver on loopback, the protocol Jaeger takes on port 4318, and checks what it receives"},
	"go test ./bench/...": {
		"it is part of the suite itself",
		"./test.sh's go test ./... runs it"},
	"go test ./bot -run '^$' -bench FirstWord -benchtime=200x": {
		"200 streamed turns of a paced model, a minute and more",
		"./test.sh runs the same benchmark once (BENCHTIME=1x bench/run.sh)"},
	"go test ./bot -run '^$' -bench 'BenchmarkTurns$|BenchmarkTurnsTraced' -benchmem -benchtime=1000x": {
		"10,000 turns in all, minutes on two cores",
		"./test.sh runs both benchmarks once (BENCHTIME=1x bench/run.sh)"},
	"go test ./bot -run '^$' -bench SlowStreams -benchtime=100x": {
		"10,000 turns of 10 seconds each, minutes and most of the machine's memory",
		"./test.sh runs the same benchmark with 100 turns (BENCHTIME=1x bench/run.sh)"},
	"go test ./bot -run '^$' -bench WaitingTurnStack -benchtime=3x": {
		"a benchmark: three child processes, each quitting with its traceback",
		"./test.sh runs the same benchmark once (BENCHTIME=1x bench/run.sh)"},
	"go test ./agent -run '^$' -bench MemoryCost -benchtime=2000x": {
		"2,000 pairs of runs, minutes on two cores",
		"./test.sh runs the same benchmark once (BENCHTIME=1x bench/run.sh)"},
	"go test ./store -run '^$' -bench 'BenchmarkOverview' -benchtime=20x": {
		"it fills an audit log of 1,000,000 records on each backend, minutes on two cores",
		"./test.sh runs the same benchmarks once (BENCHTIME=1x bench/run.sh)"},
	"go test ./store -run '^$' -bench BenchmarkAudit -benchtime=2x": {
		"it fills an audit log of 1,000,000 records, minutes on two cores",
		"./test.sh runs the same benchmarks once (BENCHTIME=1x bench/run.sh)"},
}

// notHere lists the programs whose commands need what this machine does
// not have (a Kubernetes cluster, an Azure subscription, Microsoft's own
// tools signed in to a tenant), each with why and what checks their part
// instead. Each must still be shown by some document, and the documents
// say which of their steps were not run.
var notHere = map[string]struct{ why, instead string }{
	"kubectl": {
		"it needs a Kubernetes cluster, and there is none here",
		"deploy/kubernetes renders every overlay with kustomize's library (what kubectl apply -k runs), decodes each object strictly into the Kubernetes API types, runs teamsbot config on the overlays' settings and holds the guide's kubectl create secret and kubectl apply -k commands to the manifests"},
	"az": {
		"it needs an Azure subscription and a signed-in tenant, and there is none here",
		"nothing here runs them: the documents name the Microsoft document each step follows, and say which steps were not run"},
	"atk": {
		"the Microsoft 365 Agents Toolkit CLI is not installed here, and it signs in to a tenant",
		"deploy/agents-toolkit's test validates m365agents.yml's shape and runs its teamsbot manifest step as the toolkit would"},
}

// containerPrograms are the programs of the commands that build and run
// the container image (docs/container.md). deploy.TestImage runs
// deploy/image.sh as written, holds the Containerfile that docker build
// builds to the image it made, and runs that image with podman as the page
// does (or, where podman cannot run containers, runs its exported file
// system the same way); deploy.TestDocumentedRunsAreLockedDown holds each
// podman run and docker run of the page to the flags it runs with.
var containerPrograms = []string{"deploy/image.sh", "podman", "docker"}

// runAsWritten are the programs besides teamsbot, curl and ./run.sh whose
// commands run here as the documents write them, in the document's
// working folder.
var runAsWritten = []string{"unzip"}

// placeholders are what the documents write for values only the reader
// has; a command runs with these in their place.
var placeholders = map[string]string{
	"<application id>": "5c8f0a2e-1b3d-4e6f-8a9b-0c1d2e3f4a5b",
	"<bot app id>":     "5c8f0a2e-1b3d-4e6f-8a9b-0c1d2e3f4a5b",
	"<client secret>":  "docs-client-secret-never-printed",
	"<tenant id>":      "0b2d9c7e-4f1a-4c3b-9e8d-7a6b5c4d3e2f",
	"<your host>":      "bot.example.com",
	// docs/kubernetes.md and docs/azure.md.
	"<database password>":     "docs-database-password",
	"<database host>":         "teamsbot-pg.postgres.database.azure.com",
	"<cluster issuer url>":    "https://westeurope.oic.prod-aks.azure.com/0b2d9c7e-4f1a-4c3b-9e8d-7a6b5c4d3e2f/00000000-0000-0000-0000-000000000000/",
	"<identity principal id>": "7d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6",
	"<registry id>":           "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/teamsbot-rg/providers/Microsoft.ContainerRegistry/registries/teamsbotregistry",
	"<key vault id>":          "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/teamsbot-rg/providers/Microsoft.KeyVault/vaults/teamsbot-kv",
}

// exampleKeyID is the key id the documents retire; a command runs with a
// key id that `teamsbot keys` lists as verifying in its place.
const exampleKeyID = "3f9a1c2e"

// TestCommandsInDocs runs every command of the fenced sh, bash and
// console blocks of README.md, CHANGELOG.md and docs/*.md, or accounts
// for it:
//
//   - ./run.sh runs as a newcomer runs it, on a free loopback port, until
//     it prints what getting-started.md shows; the binary it built runs
//     every teamsbot command after it;
//   - teamsbot (and go run ./cmd/teamsbot) commands run in a fresh
//     TICKETIQ_DATA with what their block exports; one that serves is
//     started, probed on /healthz and stopped; a console block's output
//     must be the one shown;
//   - curl commands run against a service in local mode started here, with
//     only the origin changed (and a Bot Connector here for serviceUrl);
//     the answer they ask for must arrive;
//   - ./test.sh and .ci/run are this suite's own script; bench/*.sh must be
//     run by test.sh; deploy/image.sh, podman and docker are deploy.TestImage's
//     (containerPrograms);
//   - anything else is run as written (runAsWritten) or listed, with the
//     reason and what runs it instead, in elsewhere.
func TestCommandsInDocs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the service, curl, unzip and Node")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	var all []command
	for _, doc := range documents(t) {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, filepath.Join(root, "docs", doc))
		all = append(all, fencedCommands(t, rel, string(raw))...)
	}
	if len(all) < 20 {
		t.Fatalf("only %d commands found; the block reader is broken", len(all))
	}

	r := &runner{t: t, root: root, bin: t.TempDir(), pages: map[string]string{}, counts: map[string]int{}}
	r.runSh(all)
	for i, c := range all {
		if i > 0 && all[i-1].file == c.file && all[i-1].block == c.block {
			continue // a block runs as one
		}
		var blk []command
		for _, d := range all[i:] {
			if d.file != c.file || d.block != c.block {
				break
			}
			blk = append(blk, d)
		}
		r.block(blk)
	}
	for cmd := range elsewhere {
		if !slices.ContainsFunc(all, func(c command) bool { return c.text == cmd }) {
			t.Errorf("elsewhere lists %q, which no document shows any more", cmd)
		}
	}
	for prog := range notHere {
		if !slices.ContainsFunc(all, func(c command) bool { w := program(c.text); return len(w) > 0 && w[0] == prog }) {
			t.Errorf("notHere lists %s, which no document runs any more", prog)
		}
	}
	var kinds []string
	for k, n := range r.counts {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, n))
	}
	slices.Sort(kinds)
	t.Logf("%d commands: %s", len(all), strings.Join(kinds, "; "))
}

// runner runs the commands of the documents.
type runner struct {
	t      *testing.T
	root   string            // the repository
	bin    string            // the folder of the teamsbot that ./run.sh built
	pages  map[string]string // each document's working folder
	counts map[string]int    // commands by how they were accounted for

	local     *localService // started for the first curl command
	connector *testenv.Connector
}

// count records how a command was accounted for.
func (r *runner) count(kind string) { r.counts[kind]++ }

// baseEnv is this process's environment without any setting of the
// service, with the teamsbot ./run.sh built first on the PATH.
func (r *runner) baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "TICKETIQ_") || name == "AZURE_FEDERATED_TOKEN_FILE" || name == "TEAMSBOT_KEY" || name == "PATH" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+r.bin+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// page returns the working folder of a document's commands: a folder of
// its own that links every top-level entry of the repository, so that
// paths such as manifest/testdata/validate.cjs resolve and what the
// commands write stays out of the repository.
func (r *runner) page(file string) string {
	if dir, ok := r.pages[file]; ok {
		return dir
	}
	dir := r.t.TempDir()
	entries, err := os.ReadDir(r.root)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(r.root, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			r.t.Fatal(err)
		}
	}
	r.pages[file] = dir
	return dir
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// process is a command started in a process group of its own, so that
// stopping it stops what it started.
type process struct {
	cmd  *exec.Cmd
	done chan error
	out  *testenv.LogBuffer
}

func start(t testing.TB, cmd *exec.Cmd) *process {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &process{cmd: cmd, done: make(chan error, 1), out: &testenv.LogBuffer{}}
	if cmd.Stdout == nil {
		cmd.Stdout = p.out
	}
	if cmd.Stderr == nil {
		cmd.Stderr = p.out
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { _ = p.stop() })
	return p
}

// stop sends SIGTERM, as an orderly shutdown asks, and waits.
func (p *process) stop() error {
	select {
	case err := <-p.done:
		p.done <- err
		return err
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		return fmt.Errorf("it did not stop within 30 s of SIGTERM")
	}
}

// healthy waits until GET /healthz on addr answers 200 ok.
func healthy(t testing.TB, p *process, addr string) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == "ok" {
				return
			}
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("it ended before /healthz answered (%v):\n%s", err, p.out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz did not answer within 60 s:\n%s", p.out)
		}
	}
}

// runSh runs ./run.sh as the documents show it, on a free loopback port,
// until it listens; checks what it prints against the transcript of
// getting-started.md; and keeps the binary it built for the other
// commands. Every ./run.sh of the documents is this run.
func (r *runner) runSh(all []command) {
	t := r.t
	shown := 0
	for _, c := range all {
		if c.text == "./run.sh" {
			shown++
		}
	}
	if shown == 0 {
		t.Fatal("no document shows ./run.sh")
	}
	transcript := runShTranscript(t)
	addr := freeAddr(t)
	cmd := exec.Command("./run.sh")
	cmd.Dir = r.root
	cmd.Env = append(r.baseEnv(), "TICKETIQ_ADDR="+addr, "TICKETIQ_DATA="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, cmd)
	stderr := p.out
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var listening string
	// A first build on a cold cache takes minutes on two cores.
	limit := time.After(8 * time.Minute)
	for listening == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("./run.sh ended before it listened (%v):\n%s", <-p.done, stderr)
			}
			if strings.HasPrefix(l, "teamsbot is listening on ") {
				listening = l
			}
		case <-limit:
			t.Fatalf("./run.sh did not listen within 8 minutes:\n%s", stderr)
		}
	}
	go func() {
		for range lines {
		}
	}()
	adapt := func(s string) string { return strings.ReplaceAll(s, "127.0.0.1:3978", addr) }
	if want := adapt(transcript.listening); listening != want {
		t.Errorf("./run.sh printed\n  %s\ngetting-started.md shows\n  %s", listening, want)
	}
	// The JSON "listening" line: every field the transcript shows but the
	// time, with the same value.
	healthy(t, p, addr)
	var logged map[string]any
	for l := range strings.SplitSeq(stderr.String(), "\n") {
		if strings.Contains(l, `"msg":"listening"`) {
			_ = json.Unmarshal([]byte(l), &logged)
		}
	}
	var want map[string]any
	if err := json.Unmarshal([]byte(adapt(transcript.logLine)), &want); err != nil {
		t.Fatalf("the transcript's listening line is not JSON: %v", err)
	}
	port := addr[strings.LastIndex(addr, ":")+1:]
	for k, v := range want {
		if s, ok := v.(string); ok {
			v = strings.ReplaceAll(s, "localhost:3978", "localhost:"+port)
		}
		if k != "time" && logged[k] != v {
			t.Errorf("./run.sh logged %s=%v, getting-started.md shows %v", k, logged[k], v)
		}
	}
	built := regexp.MustCompile(`^` + strings.ReplaceAll(regexp.QuoteMeta(adapt(transcript.built)), "260s", `\d+s`) + `$`)
	if !slices.ContainsFunc(strings.Split(stderr.String(), "\n"), built.MatchString) {
		t.Errorf("./run.sh did not print a line like\n  %s\n:\n%s", transcript.built, stderr)
	}
	bin, err := os.ReadFile(filepath.Join(r.root, ".cache", "teamsbot"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.bin, "teamsbot"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.stop(); err != nil {
		t.Errorf("./run.sh's teamsbot did not stop cleanly on SIGTERM: %v\n%s", err, stderr)
	}
	for range shown {
		r.count("./run.sh: run here")
	}
}

// runShLines are the lines of getting-started.md's transcript of ./run.sh
// that the run is held to.
type runShLines struct{ built, logLine, listening string }

func runShTranscript(t testing.TB) runShLines {
	t.Helper()
	raw, err := os.ReadFile("getting-started.md")
	if err != nil {
		t.Fatal(err)
	}
	var l runShLines
	for line := range strings.SplitSeq(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "run.sh: built in "):
			l.built = line
		case strings.HasPrefix(line, `{"time":`) && strings.Contains(line, `"msg":"listening"`):
			l.logLine = line
		case strings.HasPrefix(line, "teamsbot is listening on "):
			l.listening = line
		}
	}
	if l.built == "" || l.logLine == "" || l.listening == "" {
		t.Fatalf("getting-started.md has no transcript of ./run.sh (found %+v)", l)
	}
	return l
}

// block runs the commands of one block in order: what a block exports
// holds for the commands after it in the same block, and each block
// starts from a fresh TICKETIQ_DATA.
func (r *runner) block(blk []command) {
	t := r.t
	env := map[string]string{"TICKETIQ_DATA": t.TempDir()}
	for _, c := range blk {
		where := fmt.Sprintf("%s:%d", c.file, c.line)
		w := program(fill(t, where, c.text))
		if len(w) == 0 {
			t.Errorf("%s: %q is no command", where, c.text)
			continue
		}
		switch {
		case w[0] == "export":
			for _, kv := range w[1:] {
				name, value, ok := strings.Cut(kv, "=")
				if !ok {
					t.Errorf("%s: export %s sets nothing", where, kv)
				}
				env[name] = value
			}
		case w[0] == "./run.sh" && c.text == "./run.sh":
			// Run once, by runSh.
		case w[0] == "./run.sh":
			t.Errorf("%s: %q: only ./run.sh itself is run here; show its arguments in prose or teach this test", where, c.text)
		case w[0] == "./test.sh" || w[0] == ".ci/run":
			r.count("./test.sh and .ci/run: the test script itself")
		case regexp.MustCompile(`^bench/[a-z-]+\.sh$`).MatchString(w[0]):
			r.benchScript(where, w[0])
		case slices.Contains(containerPrograms, w[0]):
			r.count("deploy/image.sh, podman and docker: the image built and run by deploy.TestImage")
		case w[0] == "teamsbot" || (len(w) > 2 && w[0] == "go" && w[1] == "run" && w[2] == "./cmd/teamsbot"):
			r.teamsbot(c, where, env)
		case w[0] == "curl":
			r.curl(c, where, env)
		case slices.Contains(runAsWritten, w[0]):
			out, err := r.shell(c.file, fill(t, where, c.text), env)
			if err != nil {
				t.Errorf("%s: %s: %v\n%s", where, c.text, err, out)
			}
			r.count("other: run here as written")
		case notHere[w[0]].why != "":
			r.count(w[0] + ": not run here (" + notHere[w[0]].why + ")")
		default:
			if e, ok := elsewhere[c.text]; ok {
				if e.why == "" || e.instead == "" {
					t.Errorf("%s: elsewhere lists %q without why or what runs it instead", where, c.text)
				}
				r.count("listed, with what runs the same path")
				continue
			}
			t.Errorf("%s: %q is neither run by this test nor listed in elsewhere with the reason and what runs it instead", where, c.text)
		}
	}
}

// fill puts the placeholders' values in a command, and fails on a
// placeholder it does not know.
func fill(t testing.TB, where, s string) string {
	t.Helper()
	for k, v := range placeholders {
		s = strings.ReplaceAll(s, k, v)
	}
	if m := regexp.MustCompile(`<[a-z][a-z ]*>`).FindString(s); m != "" {
		t.Errorf("%s: the placeholder %s has no value in placeholders", where, m)
	}
	return s
}

// environ is the base environment with a block's settings.
func (r *runner) environ(env map[string]string) []string {
	out := r.baseEnv()
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// shell runs a command with bash in the document's working folder.
func (r *runner) shell(file, text string, env map[string]string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Dir = r.page(file)
	cmd.Env = r.environ(env)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// benchScript accounts for a benchmark script: ./test.sh must run it.
func (r *runner) benchScript(where, script string) {
	raw, err := os.ReadFile(filepath.Join(r.root, "test.sh"))
	if err != nil {
		r.t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "#") && slices.Contains(program(line), script) {
			r.count("bench/*.sh: run by ./test.sh")
			return
		}
	}
	r.t.Errorf("%s: ./test.sh does not run %s", where, script)
}

// teamsbot runs a teamsbot command. One that serves is started with a free
// loopback address (unless its block sets one), probed and stopped.
func (r *runner) teamsbot(c command, where string, env map[string]string) {
	t := r.t
	text := fill(t, where, strings.Replace(c.text, "go run ./cmd/teamsbot", "teamsbot", 1))
	args := program(text)[1:]
	if len(args) == 0 || (len(args) == 1 && args[0] == "serve") {
		if c.output != nil {
			t.Errorf("%s: a console block shows the service, which does not end", where)
			return
		}
		env := copyEnv(env)
		if env["TICKETIQ_ADDR"] == "" {
			env["TICKETIQ_ADDR"] = freeAddr(t)
		}
		cmd := exec.Command("bash", "-c", text)
		cmd.Dir = r.page(c.file)
		cmd.Env = r.environ(env)
		p := start(t, cmd)
		healthy(t, p, env["TICKETIQ_ADDR"])
		if err := p.stop(); err != nil {
			t.Errorf("%s: %s did not stop cleanly on SIGTERM: %v\n%s", where, c.text, err, p.out)
		}
		r.noSecret(where, p.out.String())
		r.count("teamsbot: run here (serving: started, /healthz, stopped)")
		return
	}
	check := func(string) {}
	switch {
	case len(args) >= 1 && args[0] == "migrate":
		check = r.prepareMigrate(where, env)
	case len(args) >= 2 && args[0] == "keys" && args[1] == "retire" && strings.Contains(text, exampleKeyID):
		text = strings.ReplaceAll(text, exampleKeyID, r.retirable(c.file, where, env))
	}
	out, err := r.shell(c.file, text, env)
	r.noSecret(where, out)
	if c.output != nil {
		if out != *c.output {
			t.Errorf("%s: %s printed\n%s\nthe document shows\n%s", where, c.text, out, *c.output)
		}
		r.count("teamsbot: run here (output compared)")
		return
	}
	if err != nil {
		t.Errorf("%s: %s: %v\n%s", where, c.text, err, out)
		return
	}
	check(out)
	r.count("teamsbot: run here")
}

func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// noSecret fails when a command printed the secret the documents'
// placeholder stands for.
func (r *runner) noSecret(where, out string) {
	if strings.Contains(out, placeholders["<client secret>"]) {
		r.t.Errorf("%s: the client secret was printed:\n%s", where, out)
	}
}

// retirable is the id of a key that `teamsbot keys` lists as verifying,
// which the documents' example id stands for.
func (r *runner) retirable(file, where string, env map[string]string) string {
	out, err := r.shell(file, "teamsbot keys", env)
	if err != nil {
		r.t.Fatalf("%s: teamsbot keys: %v\n%s", where, err, out)
	}
	m := regexp.MustCompile(`(?m)^\s+([0-9a-f]{8})\s+\S+\s+verifies$`).FindStringSubmatch(out)
	if m == nil {
		r.t.Fatalf("%s: no key verifies only, so none can be retired: the documented order is wrong\n%s", where, out)
	}
	return m[1]
}

// prepareMigrate gives `teamsbot migrate` what its section says it needs:
// a bbolt file in TICKETIQ_DATA with a run and its view (made by the
// service in local mode), and a new database in TICKETIQ_DATABASE_URL,
// which the block keeps for its next commands. The check wants the view
// copied.
func (r *runner) prepareMigrate(where string, env map[string]string) func(string) {
	t := r.t
	if env["TICKETIQ_DATABASE_URL"] == "" {
		env["TICKETIQ_DATABASE_URL"] = pgtest.Database(t)
	}
	svc := r.startLocal(env["TICKETIQ_DATA"])
	conn := testenv.StartConnector(t)
	svc.post(t, map[string]any{
		"type": "message", "id": "m1", "channelId": "msteams", "serviceUrl": conn.URL,
		"from":         map[string]any{"id": "29:megan", "aadObjectId": signin.LocalPeople()[0].UserID},
		"recipient":    map[string]any{"id": "28:bot"},
		"conversation": map[string]any{"id": "migrate-chat", "conversationType": "personal"},
		"channelData":  map[string]any{"tenant": map[string]any{"id": signin.LocalTenant}},
		"text":         "/sales_report {}",
	})
	conn.WaitMessages(t, "migrate-chat", 1)
	if err := svc.p.stop(); err != nil {
		t.Fatalf("the service did not stop: %v\n%s", err, svc.p.out)
	}
	return func(out string) {
		m := regexp.MustCompile(`(?m)^views\s+(\d+) read\s+(\d+) copied`).FindStringSubmatch(out)
		if m == nil {
			t.Errorf("%s: teamsbot migrate printed no count of views:\n%s", where, out)
			return
		}
		if n, _ := strconv.Atoi(m[2]); n < 1 {
			t.Errorf("%s: teamsbot migrate did not copy the view:\n%s", where, out)
		}
	}
}

// localService is teamsbot in local mode, as ./run.sh starts it.
type localService struct {
	base string
	p    *process
}

func (r *runner) startLocal(data string) *localService {
	t := r.t
	addr := freeAddr(t)
	cmd := exec.Command(filepath.Join(r.bin, "teamsbot"))
	cmd.Env = append(r.baseEnv(), "TICKETIQ_ADDR="+addr, "TICKETIQ_DATA="+data)
	p := start(t, cmd)
	healthy(t, p, addr)
	return &localService{base: "http://" + addr, p: p}
}

// post sends an activity to /api/messages as Teams (or the Emulator) does
// in local mode.
func (s *localService) post(t testing.TB, activity map[string]any) {
	t.Helper()
	body, _ := json.Marshal(activity)
	resp, err := http.Post(s.base+"/api/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("POST /api/messages: %d", resp.StatusCode)
	}
}

// curl runs a curl command against a service in local mode started here:
// the documents' origins (127.0.0.1:3978, localhost:3978 and
// https://bot.example.com) become the service's, and the serviceUrl
// http://127.0.0.1:9000 a Bot Connector's here. Each path the documents
// call is prepared and checked as its section says.
func (r *runner) curl(c command, where string, env map[string]string) {
	t := r.t
	if r.local == nil {
		r.local = r.startLocal(t.TempDir())
		r.connector = testenv.StartConnector(t)
	}
	text := c.text
	for _, origin := range []string{"http://127.0.0.1:3978", "http://localhost:3978", "https://bot.example.com"} {
		text = strings.ReplaceAll(text, origin, r.local.base)
	}
	text = strings.ReplaceAll(text, "http://127.0.0.1:9000", r.connector.URL)
	u := regexp.MustCompile(`http://127\.0\.0\.1:\d+(/[^\s'"]*)`).FindStringSubmatch(text)
	if u == nil {
		t.Errorf("%s: %q calls no address this test knows", where, c.text)
		return
	}
	path, err := url.Parse(u[1])
	if err != nil {
		t.Fatal(err)
	}
	env = copyEnv(env)
	var check func(out string)
	switch {
	case path.Path == "/api/messages":
		conv := regexp.MustCompile(`"conversation": \{"id": "([^"]+)"`).FindStringSubmatch(text)
		if conv == nil {
			t.Errorf("%s: the activity names no conversation", where)
			return
		}
		before := len(r.connector.Messages(conv[1]))
		check = func(string) {
			msgs := r.connector.WaitMessages(t, conv[1], before+1)
			answer := string(msgs[len(msgs)-1].Raw)
			if !strings.Contains(answer, "application/vnd.microsoft.card.adaptive") {
				t.Errorf("%s: the answer is no card:\n%s", where, answer)
			}
			// The documents ask the demo's sales report: its answer names
			// the view it made.
			if strings.Contains(text, `"text": "/sales_report {}"`) && !strings.Contains(answer, "Sales report") {
				t.Errorf("%s: the answer names no Sales report view:\n%s", where, answer)
			}
		}
	case regexp.MustCompile(`^/api/agents/[^/]+/runs$`).MatchString(path.Path):
		conv := regexp.MustCompile(`"conversation": "([^"]+)"`).FindStringSubmatch(text)
		if conv == nil {
			t.Errorf("%s: the run names no conversation", where)
			return
		}
		// The app installed in that conversation, and a key an admin made.
		r.local.post(t, map[string]any{
			"type": "installationUpdate", "action": "add", "id": "install-" + conv[1], "channelId": "msteams", "serviceUrl": r.connector.URL,
			"from": map[string]any{"id": "29:adele", "aadObjectId": signin.LocalAdmin().UserID}, "recipient": map[string]any{"id": "28:bot"},
			"conversation": map[string]any{"id": conv[1], "conversationType": "channel", "tenantId": signin.LocalTenant},
			"channelData":  map[string]any{"tenant": map[string]any{"id": signin.LocalTenant}},
		})
		welcomes := len(r.connector.WaitMessages(t, conv[1], 1))
		env["TEAMSBOT_KEY"] = r.apiKey(where, strings.Split(path.Path, "/")[3])
		check = func(out string) {
			var run struct {
				Run    string           `json:"run"`
				Views  []map[string]any `json:"views"`
				Failed bool             `json:"failed"`
			}
			if err := json.Unmarshal([]byte(out), &run); err != nil || run.Run == "" || run.Failed || len(run.Views) == 0 {
				t.Errorf("%s: the runs API answered %s", where, out)
			}
			r.connector.WaitMessages(t, conv[1], welcomes+1)
		}
	default:
		t.Errorf("%s: %s is a path this test does not know how to check: teach it", where, path.Path)
		return
	}
	out, err := r.shell(c.file, text, env)
	if err != nil {
		t.Errorf("%s: %s: %v\n%s", where, c.text, err, out)
		return
	}
	check(out)
	r.count("curl: run here, against the service in local mode")
}

// apiKey signs in as the local tenant admin and makes an API key for the
// agent in the admin API, as a tenant admin does.
func (r *runner) apiKey(where, agent string) string {
	t := r.t
	jar, _ := cookiejar.New(nil)
	admin := &http.Client{Jar: jar, Timeout: 20 * time.Second}
	resp, err := admin.PostForm(r.local.base+"/signin/local", url.Values{"person": {signin.LocalAdmin().UserID}, "return": {"/admin"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: the local sign-in as the admin: %d", where, resp.StatusCode)
	}
	body, _ := json.Marshal(map[string]string{"name": "From the documents", "agent": agent})
	req, _ := http.NewRequest(http.MethodPost, r.local.base+"/api/admin/keys", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err = admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var key struct {
		Secret string `json:"secret"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&key)
	if resp.StatusCode != http.StatusCreated || key.Secret == "" {
		t.Fatalf("%s: the admin API made no key: %d", where, resp.StatusCode)
	}
	return key.Secret
}
