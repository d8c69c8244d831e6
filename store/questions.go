package store

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Bounds of a question's record.
const (
	// MaxQuestionShown bounds what a question's card shows.
	MaxQuestionShown = 64 << 10
	// MaxQuestionAnswer bounds a question's answer.
	MaxQuestionAnswer = 64 << 10
	// maxServiceURL bounds a Bot Connector address.
	maxServiceURL = 2 << 10
)

// questionKept is how long after its ExpiresAt a question is kept before
// a sweep deletes it, as an authorization request is: a press of its card
// that comes late is told that the question ended, not that it is
// unknown.
const questionKept = mcpAuthRequestKept

// Question is a server's question to a person (elicitation) waiting for its answer, shared by replicas.
// It lives in the store so that the person's answer may reach another replica than the one whose run waits.
type Question struct {
	ID             string `json:"id"` // the question's id (random, as agent.Question.ID); key part rules
	TenantID       string `json:"tenantId"`
	UserID         string `json:"userId"`              // whose answer it is (Entra object id)
	ConversationID string `json:"conversationId"`      // the conversation the card is in
	ServiceURL     string `json:"serviceUrl"`          // the Bot Connector address of that conversation
	CardID         string `json:"cardId,omitempty"`    // the card's activity id; empty until posted
	ReplyToID      string `json:"replyToId,omitempty"` // the activity the card replies to
	// Shown is what the card shows, as the bot encodes it (JSON), at most MaxQuestionShown; the store never reads it.
	Shown []byte `json:"shown"`
	// Status is one of the Question* constants below.
	Status string `json:"status"`
	// Answer is the reply once answered (JSON, the bot's), at most MaxQuestionAnswer; empty otherwise.
	Answer    []byte    `json:"answer,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"` // after CreatedAt
	Version   uint64    `json:"version"`   // the store sets it
}

// The statuses of a Question.
const (
	QuestionWaiting  = "waiting"  // asked, waiting for the person
	QuestionAnswered = "answered" // the person answered; Answer set
	QuestionEnded    = "ended"    // over: the run took the answer, or stopped waiting
)

// questionStatuses are the statuses a question may have.
var questionStatuses = [...]string{QuestionWaiting, QuestionAnswered, QuestionEnded}

// check checks a question before it is stored.
func (q Question) check() error {
	if err := checkKeyParts("the question id", q.ID, "the tenant id", q.TenantID, "the user id", q.UserID,
		"the conversation id", q.ConversationID); err != nil {
		return err
	}
	for _, p := range []struct {
		what, v string
		limit   int
	}{
		{"the service URL", q.ServiceURL, maxServiceURL}, {"the card id", q.CardID, maxIDLen}, {"the activity replied to", q.ReplyToID, maxIDLen},
	} {
		if err := checkText(p.what, p.v, p.limit); err != nil {
			return err
		}
	}
	if q.ServiceURL == "" {
		return invalid("the service URL is empty")
	}
	if err := checkBytes("what the card shows", q.Shown, true, MaxQuestionShown); err != nil {
		return err
	}
	if err := checkBytes("the answer", q.Answer, false, MaxQuestionAnswer); err != nil {
		return err
	}
	if !slices.Contains(questionStatuses[:], q.Status) {
		return invalid("the status %q is none of %s", q.Status, strings.Join(questionStatuses[:], ", "))
	}
	if q.ExpiresAt.IsZero() {
		return invalid("the question has no expiry")
	}
	if !q.ExpiresAt.After(q.CreatedAt) {
		return invalid("the question expires at %s, not after it was asked at %s",
			q.ExpiresAt.UTC().Format(time.RFC3339), q.CreatedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// PutQuestion stores a new question, with the audit records of its asking
// in the same commit. An ID stored already is ErrConflict. Ids are
// checked as key parts, ServiceURL is required, Shown required and at
// most MaxQuestionShown bytes, Answer at most MaxQuestionAnswer, Status
// one of the Question* constants (an empty one is QuestionWaiting), and
// ExpiresAt after CreatedAt (ErrInvalid otherwise). A zero CreatedAt is
// set from the store's clock, and Version is 1.
func (s *Store) PutQuestion(ctx context.Context, q Question, audit ...AuditRecord) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if q.CreatedAt.IsZero() {
		q.CreatedAt = s.now()
	}
	if q.Status == "" {
		q.Status = QuestionWaiting
	}
	q.Version = 1
	if err := q.check(); err != nil {
		return err
	}
	enc, err := encode(q)
	if err != nil {
		return fmt.Errorf("question %s: %w", q.ID, err)
	}
	err = create(ctx, s, q.TenantID, "question id "+q.ID, enc, audit, func(r reader) error {
		_, err := r.question(q.ID)
		return err
	}, writer.putQuestion)
	if err != nil {
		return fmt.Errorf("store: put question %s of tenant %s: %w", q.ID, q.TenantID, err)
	}
	return nil
}

// Question returns a question by its id; ErrNotFound when there is none
// (or a sweep deleted it, a day after it expired). A question past its
// ExpiresAt is returned as stored: what it means is the caller's to say.
func (s *Store) Question(ctx context.Context, id string) (Question, error) {
	if err := ctx.Err(); err != nil {
		return Question{}, err
	}
	if err := checkKeyPart("the question id", id); err != nil {
		return Question{}, err
	}
	q, err := get(ctx, s, "question", id, reader.question)
	if err != nil {
		return Question{}, fmt.Errorf("store: %w", err)
	}
	return q, nil
}

// UpdateQuestion changes a question in one commit: it reads the stored
// question, change edits it, and the store writes it with Version one
// more, with the audit records audit makes of the question before and
// after (nil writes none) in the same commit. Of changes to one question
// at once, each sees the one committed before it (on PostgreSQL the row
// is locked from the read to the commit): of two answers that require
// QuestionWaiting, one is stored and the other sees QuestionAnswered. An
// error from change is returned as it is, unwrapped, and nothing is
// written. ID, tenant, user, conversation and CreatedAt cannot change;
// the rest is checked as by PutQuestion. change and audit may run more
// than once and must only compute. An unknown question is ErrNotFound.
// It returns the question as stored.
func (s *Store) UpdateQuestion(ctx context.Context, id string, change func(*Question) error, audit func(before, after Question) []AuditRecord) (Question, error) {
	if err := ctx.Err(); err != nil {
		return Question{}, err
	}
	if err := checkKeyPart("the question id", id); err != nil {
		return Question{}, err
	}
	var after Question
	var refused error
	err := s.write(ctx, false, func(w writer) error {
		refused = nil
		before, err := w.question(id)
		if err != nil {
			return err
		}
		after = before
		// change's own, so that before stays as read
		after.Shown, after.Answer = bytes.Clone(before.Shown), bytes.Clone(before.Answer)
		if err := change(&after); err != nil {
			refused = err
			return err
		}
		after.ID, after.TenantID, after.UserID, after.ConversationID, after.CreatedAt =
			before.ID, before.TenantID, before.UserID, before.ConversationID, before.CreatedAt
		after.Version = before.Version + 1
		if err := after.check(); err != nil {
			return err
		}
		enc, err := encode(after)
		if err != nil {
			return err
		}
		if err := w.putQuestion(enc, &before); err != nil {
			return err
		}
		if audit == nil {
			return nil
		}
		return s.auditFor(w, before.TenantID, func() []AuditRecord { return audit(before, after) })
	})
	if refused != nil && err == refused {
		return Question{}, refused
	}
	if err != nil {
		return Question{}, fmt.Errorf("store: update question %.128s: %w", id, err)
	}
	return after, nil
}

// DeleteQuestion deletes a question; ErrNotFound when there is none.
func (s *Store) DeleteQuestion(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkKeyPart("the question id", id); err != nil {
		return err
	}
	err := s.write(ctx, false, func(w writer) error {
		q, err := w.question(id)
		if err != nil {
			return err
		}
		return w.deleteQuestion(q)
	})
	if err != nil {
		return fmt.Errorf("store: delete question %.128s: %w", id, err)
	}
	return nil
}
