package agent

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"

	"teamsbot/internal/textclip"
	"teamsbot/mcpauth"
	"teamsbot/store"
)

// What a person reads of a run and what an operator reads are kept apart.
// A run note, a failed call's message and the text the model is given of a
// failure say what failed in the person's words ("the crm server is
// unavailable") and carry a short reference; the detail (a path, an exec
// error, a server's answer, a Go error chain) goes only to the log line
// and the run record's Problems under that reference, and into the "why"
// of the call's audit record. Every answer card, streaming message,
// triggered run card and playground chat shows the person's words only.

// refAlphabet is Crockford's base32: no I, L, O or U, so that a reference
// read aloud or typed from a screenshot comes out right.
const refAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// refLen is the length of a reference: 40 random bits, enough that two
// problems in the retention period do not share one.
const refLen = 8

// newRef returns a new reference for a problem.
func newRef() string {
	var b [refLen]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	for i := range b {
		b[i] = refAlphabet[b[i]&31]
	}
	return string(b[:])
}

// withRef is words for a person followed by the reference of the detail
// kept for operators.
func withRef(said, ref string) string { return said + " (ref " + ref + ")" }

// problem records something that went wrong in the run whose detail is for
// operators only, and returns the person's words with its reference. The
// log line and the run record hold the detail under the reference.
func (r *runState) problem(detail error, format string, args ...any) (said, ref string) {
	said = oneLine(textclip.Clip(fmt.Sprintf(format, args...), maxNoteBytes))
	ref = newRef()
	text := "unknown"
	if detail != nil {
		text = oneLine(textclip.Clip(detail.Error(), maxReasonBytes))
	}
	r.problems = append(r.problems, store.RunProblem{Ref: ref, Said: said, Detail: text})
	r.svc.log.Warn("run problem", "run", r.id, "agent", r.agent.cfg.ID, "tenant", r.person.TenantID, "ref", ref, "said", said, "err", text)
	return withRef(said, ref), ref
}

// noteProblem adds a run note for a problem: the person's words and the
// reference; the detail goes where problem puts it.
func (r *runState) noteProblem(detail error, format string, args ...any) {
	said, _ := r.problem(detail, format, args...)
	r.answer.Notes = append(r.answer.Notes, said)
}

// callFailure says in a person's words why a tool call of the model did
// not give a result, from the error of the governed path: a denial by the
// organisation's rules, a server that cannot be reached, a tool that did
// not answer in time, or any other failure of the call.
func callFailure(server, tool string, err error) string {
	if words, ok := authFailure(server, err); ok {
		return words
	}
	switch {
	case errors.Is(err, ErrDenied):
		return fmt.Sprintf("your organisation's rules do not allow the %s tool %s", server, tool)
	case errors.Is(err, ErrBadRequest):
		return fmt.Sprintf("the model gave the %s tool %s arguments that are not a JSON object", server, tool)
	case errors.Is(err, ErrUnavailable):
		return fmt.Sprintf("the %s server is unavailable", server)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Sprintf("the %s tool %s did not answer in time", server, tool)
	}
	return fmt.Sprintf("the %s tool %s failed", server, tool)
}

// authFailure says in a person's words why a server reached as each
// person could not be used: not connected, not connected in time, its
// authorization refused (with mcpauth's words of why), or a run without a
// person.
func authFailure(server string, err error) (string, bool) {
	switch {
	case errors.Is(err, ErrNeedsPerson):
		return fmt.Sprintf("the %s server works as each person who asks, and this run is for nobody in particular", server), true
	case errors.Is(err, mcpauth.ErrTimedOut):
		return fmt.Sprintf("%s was not connected in time, so the answer goes without it; ask again to connect it", server), true
	case errors.Is(err, mcpauth.ErrNotConnected):
		return fmt.Sprintf("you have not connected %s, or your connection has ended; ask again in Teams to connect it", server), true
	case errors.Is(err, mcpauth.ErrRefused):
		var w interface{ Words() string }
		if errors.As(err, &w) && w.Words() != "" {
			return strings.TrimSuffix(w.Words(), "."), true
		}
		return fmt.Sprintf("%s could not be connected", server), true
	}
	return "", false
}
