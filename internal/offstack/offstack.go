// Package offstack runs deep work off a long-lived goroutine's stack.
//
// A goroutine's stack grows to the deepest call it has made, and Go gives
// the memory back only when a garbage collection finds the goroutine using
// under a quarter of it: with few collections (a large heap, GOGC above
// 100) it may never. A Teams turn waits minutes for its model, and
// thousands wait at once; a turn that once decoded a conversation's
// memory or evaluated policies on its own stack then waits with 16 or
// 32 KiB where 8 would do. Such work runs in a goroutine of its own,
// whose stack goes with it, while the turn waits for it with a shallow
// one.
package offstack

// Run calls f in a goroutine of its own and returns once f has. A panic
// in f is carried back and raised again in the caller, as if f had run
// there.
func Run(f func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}
