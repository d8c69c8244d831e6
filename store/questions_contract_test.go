package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"teamsbot/store"
)

func question(id string, created time.Time) store.Question {
	return store.Question{
		ID: id, TenantID: "tenant-a", UserID: "ada-oid", ConversationID: "a:1personal-chat", ServiceURL: "https://smba.trafficmanager.net/emea/",
		ReplyToID: "1767261600000", Shown: []byte(`{"server":"crm","message":"Which project?","fields":[{"name":"project","type":"string"}]}`),
		CreatedAt: created, ExpiresAt: created.Add(10 * time.Minute),
	}
}

// errNotWaiting is what a change refuses a question that is no longer
// waiting with.
var errNotWaiting = errors.New("not waiting")

// answerQuestion is the change a press of the card makes: only a waiting
// question takes an answer.
func answerQuestion(reply string) func(q *store.Question) error {
	return func(q *store.Question) error {
		if q.Status != store.QuestionWaiting {
			return errNotWaiting
		}
		q.Status, q.Answer = store.QuestionAnswered, []byte(reply)
		return nil
	}
}

// Questions are put once, read back as put, changed in one commit with
// their audit records (what names them kept), a replayed answer leaves
// them as they were, and a deleted one is gone.
func testQuestions(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	// A zero CreatedAt is the store's clock; an empty status is waiting.
	q := question("q-1", time.Time{})
	q.ExpiresAt = clk.Now().Add(10 * time.Minute)
	if err := s.PutQuestion(ctx, q, store.AuditRecord{Action: "question.ask", Actor: "ada-oid"}); err != nil {
		t.Fatal(err)
	}
	want := q
	want.CreatedAt, want.Status, want.Version = clk.Now(), store.QuestionWaiting, 1
	got, err := s.Question(ctx, "q-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read back (-put +got):\n%s", diff)
	}
	if _, err := s.Question(ctx, "q-2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown id: %v, want ErrNotFound", err)
	}
	// An id stored already is refused, and nothing is written.
	dup := question("q-1", clk.Now())
	dup.UserID = "eve-oid"
	if err := s.PutQuestion(ctx, dup, store.AuditRecord{Action: "question.ask"}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("the same id again: %v, want ErrConflict", err)
	}
	if got, _ := s.Question(ctx, "q-1"); got.UserID != "ada-oid" || got.Version != 1 {
		t.Errorf("a refused put changed the question: %+v", got)
	}

	// The card is posted; what names the question stays.
	clk.Advance(time.Second)
	posted, err := s.UpdateQuestion(ctx, "q-1", func(q *store.Question) error {
		q.CardID = "1767261601000"
		q.ID, q.TenantID, q.UserID, q.ConversationID, q.CreatedAt, q.Version = "q-9", "tenant-b", "eve-oid", "other", clk.Now(), 40
		return nil
	}, nil)
	if err != nil || posted.CardID != "1767261601000" || posted.Version != 2 || posted.ID != "q-1" || posted.TenantID != "tenant-a" ||
		posted.UserID != "ada-oid" || posted.ConversationID != "a:1personal-chat" || !posted.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("posted: %+v %v", posted, err)
	}
	if _, err := s.Question(ctx, "q-9"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the id moved: %v", err)
	}
	// Answered, with its audit record; the change edits its own bytes,
	// never those audit sees before.
	var before, after store.Question
	answered, err := s.UpdateQuestion(ctx, "q-1", func(q *store.Question) error {
		q.Shown[0] = '['
		return answerQuestion(`{"action":"accept","content":{"project":"Apollo"}}`)(q)
	}, func(b, a store.Question) []store.AuditRecord {
		before, after = b, a
		return []store.AuditRecord{{Action: "question.answer", Actor: a.UserID}}
	})
	if err != nil || answered.Status != store.QuestionAnswered || answered.Version != 3 ||
		string(answered.Answer) != `{"action":"accept","content":{"project":"Apollo"}}` {
		t.Fatalf("answered: %+v %v", answered, err)
	}
	if before.Status != store.QuestionWaiting || before.Shown[0] != '{' || after.Status != store.QuestionAnswered || after.Shown[0] != '[' {
		t.Errorf("audit saw before %s %q, after %s %q", before.Status, before.Shown[:1], after.Status, after.Shown[:1])
	}
	stored, err := s.Question(ctx, "q-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(answered, stored); diff != "" {
		t.Errorf("stored after the answer (-returned +stored):\n%s", diff)
	}
	// A second press: the change refuses, its error comes back as it is,
	// and the question stays as it was.
	audited := false
	got, err = s.UpdateQuestion(ctx, "q-1", answerQuestion(`{"action":"decline"}`), func(b, a store.Question) []store.AuditRecord {
		audited = true
		return []store.AuditRecord{{Action: "question.answer"}}
	})
	if err != errNotWaiting {
		t.Errorf("second answer: %v, want the change's own error", err)
	}
	if got.ID != "" || audited {
		t.Errorf("second answer returned %+v, audit called %v", got, audited)
	}
	if again, err := s.Question(ctx, "q-1"); err != nil || !cmp.Equal(stored, again) {
		t.Errorf("the second answer changed the question: %+v %v", again, err)
	}
	// The run takes the answer.
	ended, err := s.UpdateQuestion(ctx, "q-1", func(q *store.Question) error {
		q.Status = store.QuestionEnded
		return nil
	}, nil)
	if err != nil || ended.Status != store.QuestionEnded || ended.Version != 4 || string(ended.Answer) != string(stored.Answer) {
		t.Errorf("ended: %+v %v", ended, err)
	}
	if _, err := s.UpdateQuestion(ctx, "q-9", answerQuestion("{}"), nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of an unknown question: %v", err)
	}

	// Deleted, it is gone, and its id is free again.
	if err := s.DeleteQuestion(ctx, "q-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Question(ctx, "q-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a deleted question: %v, want ErrNotFound", err)
	}
	if err := s.DeleteQuestion(ctx, "q-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a second delete: %v, want ErrNotFound", err)
	}
	if _, err := s.UpdateQuestion(ctx, "q-1", answerQuestion("{}"), nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a deleted question: %v", err)
	}
	if err := s.PutQuestion(ctx, question("q-1", clk.Now())); err != nil {
		t.Errorf("a deleted question's id: %v", err)
	}
	if diff := cmp.Diff([]string{"question.ask", "question.answer"}, actions(auditOf(t, s, "tenant-a"))); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
}

// What the store refuses of questions, it refuses in words, and writes
// nothing of.
func testQuestionRefusals(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	now := clk.Now()
	for _, c := range []struct {
		name   string
		change func(q *store.Question)
		words  string
	}{
		{"no id", func(q *store.Question) { q.ID = "" }, "the question id is empty"},
		{"NUL in the id", func(q *store.Question) { q.ID = "q\x00" }, "the question id contains a NUL byte"},
		{"long id", func(q *store.Question) { q.ID = strings.Repeat("q", 513) }, "the question id is 513 bytes long, at most 512"},
		{"no tenant", func(q *store.Question) { q.TenantID = "" }, "the tenant id is empty"},
		{"no user", func(q *store.Question) { q.UserID = "" }, "the user id is empty"},
		{"no conversation", func(q *store.Question) { q.ConversationID = "" }, "the conversation id is empty"},
		{"conversation not UTF-8", func(q *store.Question) { q.ConversationID = "a:\xff" }, "the conversation id is not valid UTF-8"},
		{"no service URL", func(q *store.Question) { q.ServiceURL = "" }, "the service URL is empty"},
		{"long service URL", func(q *store.Question) { q.ServiceURL = "https://x/" + strings.Repeat("a", 2<<10) }, "the service URL is 2058 bytes long, at most 2048"},
		{"card id with NUL", func(q *store.Question) { q.CardID = "1\x00" }, "the card id contains a NUL byte"},
		{"long reply-to id", func(q *store.Question) { q.ReplyToID = strings.Repeat("1", 513) }, "the activity replied to is 513 bytes long, at most 512"},
		{"nothing shown", func(q *store.Question) { q.Shown = nil }, "what the card shows is empty"},
		{"too much shown", func(q *store.Question) { q.Shown = make([]byte, 64<<10+1) }, "what the card shows is 65537 bytes long, at most 65536"},
		{"long answer", func(q *store.Question) { q.Answer = make([]byte, 64<<10+1) }, "the answer is 65537 bytes long, at most 65536"},
		{"unknown status", func(q *store.Question) { q.Status = "lost" }, `the status "lost" is none of waiting, answered, ended`},
		{"no expiry", func(q *store.Question) { q.ExpiresAt = time.Time{} }, "the question has no expiry"},
		{"expires when asked", func(q *store.Question) { q.ExpiresAt = q.CreatedAt },
			"the question expires at 2026-03-01T09:00:00Z, not after it was asked at 2026-03-01T09:00:00Z"},
		{"expires before asked", func(q *store.Question) { q.ExpiresAt = q.CreatedAt.Add(-time.Hour) },
			"the question expires at 2026-03-01T08:00:00Z, not after it was asked at 2026-03-01T09:00:00Z"},
	} {
		q := question("q-1", now)
		c.change(&q)
		err := s.PutQuestion(ctx, q, store.AuditRecord{Action: "question.ask"})
		if !errors.Is(err, store.ErrInvalid) || words(err) != c.words {
			t.Errorf("%s: %v (words %q), want ErrInvalid saying %q", c.name, err, words(err), c.words)
		}
	}
	// The bounds are inclusive.
	full := question("q-full", now)
	full.Shown, full.Answer = make([]byte, store.MaxQuestionShown), make([]byte, store.MaxQuestionAnswer)
	if err := s.PutQuestion(ctx, full); err != nil {
		t.Errorf("a question of the largest size: %v", err)
	}
	if _, err := s.Question(ctx, "q-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a refused question was stored: %v", err)
	}
	if recs := auditOf(t, s, "tenant-a"); len(recs) != 0 {
		t.Errorf("refused puts wrote audit records: %v", actions(recs))
	}
	// A change that breaks a rule writes nothing either.
	if err := s.PutQuestion(ctx, question("q-1", now)); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(q *store.Question){
		"no status":     func(q *store.Question) { q.Status, q.Answer = "", []byte("{}") },
		"long answer":   func(q *store.Question) { q.Status, q.Answer = store.QuestionAnswered, make([]byte, 64<<10+1) },
		"expiry before": func(q *store.Question) { q.ExpiresAt = q.CreatedAt },
	} {
		_, err := s.UpdateQuestion(ctx, "q-1", func(q *store.Question) error { change(q); return nil }, nil)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("an update to %s: %v, want ErrInvalid", name, err)
		}
	}
	if got, _ := s.Question(ctx, "q-1"); got.Version != 1 || got.Answer != nil || got.Status != store.QuestionWaiting {
		t.Errorf("a refused update was written: %+v", got)
	}
	for _, id := range []string{"", "a\x00b"} {
		if _, err := s.Question(ctx, id); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Question(%q): %v", id, err)
		}
		if _, err := s.UpdateQuestion(ctx, id, answerQuestion("{}"), nil); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("UpdateQuestion(%q): %v", id, err)
		}
		if err := s.DeleteQuestion(ctx, id); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("DeleteQuestion(%q): %v", id, err)
		}
	}
}

// Of two answers to one question at once, each requiring it waiting,
// exactly one is stored and the other sees the answer it left; of
// questions put at once with one id, one is stored.
func testQuestionConcurrency(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	const rounds, presses = 10, 2
	for round := range rounds {
		id := fmt.Sprintf("q-%d", round)
		if err := s.PutQuestion(ctx, question(id, clk.Now())); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, presses)
		saw := make([]string, presses)
		for i := range presses {
			wg.Go(func() {
				<-start
				_, errs[i] = s.UpdateQuestion(ctx, id, func(q *store.Question) error {
					saw[i] = q.Status
					return answerQuestion(fmt.Sprintf(`{"press":%d}`, i))(q)
				}, func(_, a store.Question) []store.AuditRecord {
					return []store.AuditRecord{{Action: "question.answer", Fields: map[string]any{"answer": string(a.Answer)}}}
				})
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner < 0:
				winner = i
			case err == nil:
				t.Errorf("round %d: presses %d and %d both answered", round, winner, i)
			case err != errNotWaiting:
				t.Errorf("round %d: press %d: %v", round, i, err)
			case saw[i] != store.QuestionAnswered:
				t.Errorf("round %d: press %d refused a question it saw %q", round, i, saw[i])
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody answered: %v", round, errs)
		}
		got, err := s.Question(ctx, id)
		if err != nil || got.Version != 2 || string(got.Answer) != fmt.Sprintf(`{"press":%d}`, winner) {
			t.Errorf("round %d: stored %+v %v, want the answer of press %d at version 2", round, got, err, winner)
		}
	}
	if recs := auditOf(t, s, "tenant-a"); len(recs) != rounds {
		t.Errorf("%d audit records, want one per round's winner", len(recs))
	}

	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			<-start
			q := question("twin", clk.Now())
			q.UserID = fmt.Sprintf("user-%d", i)
			errs[i] = s.PutQuestion(ctx, q)
		})
	}
	close(start)
	wg.Wait()
	stored := 0
	for i, err := range errs {
		switch {
		case err == nil:
			stored++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("put %d: %v", i, err)
		}
	}
	if stored != 1 {
		t.Errorf("%d questions stored with one id, want 1", stored)
	}
}

// A sweep deletes the questions a day after they expired, whatever their
// status, and counts them; a question given more time is kept by its new
// expiry, and one deleted before is not counted.
func testSweepQuestions(t *testing.T, bk backend) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, bk, clk)
	t0 := clk.Now()
	for i, life := range []time.Duration{time.Minute, 10 * time.Minute, time.Hour, 25 * time.Hour, time.Minute} {
		q := question(fmt.Sprintf("q-%d", i), t0)
		q.ExpiresAt = t0.Add(life)
		if i == 1 {
			q.Status = store.QuestionEnded
		}
		if err := s.PutQuestion(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.UpdateQuestion(ctx, "q-0", func(q *store.Question) error {
		q.ExpiresAt = t0.Add(2 * time.Hour)
		return nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteQuestion(ctx, "q-4"); err != nil {
		t.Fatal(err)
	}
	// A day after the second expired, less a nanosecond: nothing goes.
	clk.Set(t0.Add(10*time.Minute + 24*time.Hour - time.Nanosecond))
	st, err := s.Sweep(ctx)
	if err != nil || st.Questions != 0 {
		t.Fatalf("sweep before a day: %+v %v", st, err)
	}
	// A day after the second expired: it goes, and the one given more
	// time stays.
	clk.Set(t0.Add(10*time.Minute + 24*time.Hour))
	if st, err = s.Sweep(ctx); err != nil || st.Questions != 1 {
		t.Fatalf("sweep: %+v %v, want 1 question", st, err)
	}
	if _, err := s.Question(ctx, "q-0"); err != nil {
		t.Errorf("the question given more time: %v", err)
	}
	// A day after the extended one expired, and the third: both go.
	clk.Set(t0.Add(2*time.Hour + 24*time.Hour))
	if st, err = s.Sweep(ctx); err != nil || st.Questions != 2 {
		t.Fatalf("sweep: %+v %v, want 2 questions", st, err)
	}
	for i, kept := range []bool{false, false, false, true, false} {
		_, err := s.Question(ctx, fmt.Sprintf("q-%d", i))
		if kept && err != nil {
			t.Errorf("q-%d swept too soon: %v", i, err)
		}
		if !kept && !errors.Is(err, store.ErrNotFound) {
			t.Errorf("q-%d kept: %v", i, err)
		}
	}
	clk.Advance(100 * 24 * time.Hour)
	if st, err = s.Sweep(ctx); err != nil || st.Questions != 1 || st.MCPAuthRequests != 0 {
		t.Errorf("the last sweep: %+v %v, want the last question", st, err)
	}
}
