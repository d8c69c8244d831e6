package bot

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"teamsbot/agent"
	"teamsbot/internal/testenv"
)

// everythingServer starts the official @modelcontextprotocol/server-everything
// (its version is the one in package.json) over Streamable HTTP on a
// loopback port and returns its endpoint. Without Node or the package the
// test fails (skips under -short): it is about a real peer.
func everythingServer(t *testing.T) string {
	t.Helper()
	main, err := filepath.Abs("../node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	node, nodeErr := exec.LookPath("node")
	_, pkgErr := os.Stat(main)
	if nodeErr != nil || pkgErr != nil {
		if testing.Short() {
			t.Skip("node or @modelcontextprotocol/server-everything missing (-short)")
		}
		t.Fatalf("this test needs node and @modelcontextprotocol/server-everything in node_modules (npm ci): node: %v, package: %v", nodeErr, pkgErr)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(node, main, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port))
	logs := &testenv.LogBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("server-everything:\n%s", logs.String())
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server-everything did not listen on %s: %v\n%s", addr, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "http://" + addr + "/mcp"
}

// The official server-everything's trigger-elicitation-request asks for
// every kind of field (strings with formats, integer, number, boolean,
// untitled, titled and legacy enums, multiple choices), most with
// defaults: its card in Teams, a wrong answer, the answer it gets; then
// decline and cancel; and its trigger-url-elicitation's address.
func TestServerEverythingAsksInTeams(t *testing.T) {
	url := everythingServer(t)
	h := newHarness(t, setup{servers: []agent.ServerConfig{{Name: "everything", URL: url, Timeout: "30s"}}})
	const conv = "a:personal-everything"
	h.send(h.message("personal", conv, "e1", "/trigger-elicitation-request {}"))
	card, q := questionCard(t, h, "e1")
	content := string(card.Activity.Attachments[0].Content)
	for _, want := range []string{
		"everything asks for your input", "Please provide inputs for the following fields:",
		`"field:name"`, `"field:check"`, `"field:email"`, `"field:homepage"`, `"field:birthdate"`, `"field:integer"`, `"field:number"`,
		`"field:untitledSingleSelectEnum"`, `"field:untitledMultipleSelectEnum"`, `"field:titledSingleSelectEnum"`, `"field:titledMultipleSelectEnum"`, `"field:legacyTitledEnum"`,
		"It was a dark and stormy night.", "Wonder Woman", "Salmon", "Reptiles",
	} {
		if !strings.Contains(content, want) {
			t.Errorf("the card lacks %s", want)
		}
	}
	if strings.Index(content, `"field:name"`) > strings.Index(content, `"field:legacyTitledEnum"`) {
		t.Errorf("the fields are not in the server's order")
	}

	press(h, "personal", conv, "e2", "", q, "accept", map[string]string{"name": "", "email": "ada@", "integer": "500"})
	calls := h.conn.waitFor(t, "the card with what to correct", func(cs []received) bool { return len(updatesOf(cs, card.AssignedID)) == 1 })
	again := updatesOf(calls, card.AssignedID)[0]
	for _, want := range []string{"String is required.", "String with email format: enter an email address", "Integer: at most 100."} {
		if !strings.Contains(again, want) {
			t.Errorf("the card after a wrong answer lacks %q", want)
		}
	}

	press(h, "personal", conv, "e3", "", q, "accept", map[string]string{
		"name": "Ada Lovelace", "check": "true", "firstLine": "It was a dark and stormy night.", "email": "ada@example.com",
		"homepage": "https://ada.example.com", "birthdate": "1815-12-10", "integer": "7", "number": "2.5",
		"untitledSingleSelectEnum": "Rachel", "untitledMultipleSelectEnum": "Piano,Violin", "titledSingleSelectEnum": "hero-3",
		"titledMultipleSelectEnum": "fish-2", "legacyTitledEnum": "pet-2",
	})
	answer := answerOf(t, h, "e1", "User provided the requested information")
	for _, want := range []string{"Name: Ada Lovelace", "Favorite Integer: 7", "Favorite Number: 2.5", "Birthdate: 1815-12-10"} {
		if !strings.Contains(answer, want) {
			t.Errorf("the answer lacks %q: %s", want, answer)
		}
	}

	for i, action := range []string{"decline", "cancel"} {
		id := "e" + strconv.Itoa(10+i)
		h.send(h.message("personal", conv, id, "/trigger-elicitation-request {}"))
		_, q := questionCard(t, h, id)
		press(h, "personal", conv, id+"b", "", q, action, nil)
		answerOf(t, h, id, map[string]string{"decline": "User declined", "cancel": "User cancelled"}[action])
	}

	h.send(h.message("personal", conv, "e20", `/trigger-url-elicitation {"url": "https://login.example.com/consent", "message": "Grant access to continue."}`))
	card, q = questionCard(t, h, "e20")
	if c := strings.ReplaceAll(string(card.Activity.Attachments[0].Content), "\u200b", ""); !strings.Contains(c, "https://login.example.com/consent") || !strings.Contains(c, "Grant access to continue.") {
		t.Errorf("the URL card: %s", c)
	}
	press(h, "personal", conv, "e21", "", q, "accept", nil)
	calls = h.conn.waitFor(t, "the card with its Open button", func(cs []received) bool { return len(updatesOf(cs, card.AssignedID)) == 1 })
	for _, c := range calls {
		if c.Method == "PUT" && c.ActivityID == card.AssignedID {
			if urls := openURLs(t, c.Activity.Attachments[0].Content); len(urls) != 1 || urls[0] != "https://login.example.com/consent" {
				t.Errorf("Open buttons %v", urls)
			}
		}
	}
}
