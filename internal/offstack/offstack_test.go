package offstack

import (
	"runtime"
	"strings"
	"testing"
)

// Run's work happens on another goroutine, and Run returns after it: its
// effects are seen, and the caller's stack never held its frames.
func TestRunIsAnotherGoroutineAndWaits(t *testing.T) {
	var inside string
	Run(func() { inside = goroutine() })
	if inside == "" {
		t.Fatal("f had not run when Run returned")
	}
	if outside := goroutine(); inside == outside {
		t.Errorf("f ran on the caller's goroutine (%s)", outside)
	}
}

// goroutine is the calling goroutine's header in a traceback
// ("goroutine 7").
func goroutine() string {
	buf := make([]byte, 4096)
	header, _, _ := strings.Cut(string(buf[:runtime.Stack(buf, false)]), " [")
	return header
}

// A panic in f reaches the caller, as it would have had f run there.
func TestRunCarriesAPanicBack(t *testing.T) {
	defer func() {
		if p := recover(); p != "broken" {
			t.Errorf("recovered %v, want f's panic", p)
		}
	}()
	Run(func() { panic("broken") })
	t.Error("Run returned after f panicked")
}
