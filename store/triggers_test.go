package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

func hash64(c byte) string { return strings.Repeat(string(c), 64) }

// A version-4 file opens at version 5 with the new buckets, and what it
// held is still there.
func TestMigrationV5AddsKeysAndTriggers(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "teamsbot.db")
	old := mustOpen(t, path, schema()[:4])
	if err := old.PutConversation(ctx, ConversationRef{Key: "t/c", TenantID: "t", ConversationID: "c"}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{bucketAPIKeys, bucketAPIKeyIDs, bucketTriggers, bucketTriggersByConv} {
		if hasBucket(t, old, b) {
			t.Fatalf("a v4 file already has %s", b)
		}
	}
	old.Close()
	s := mustOpen(t, path, schema())
	defer s.Close()
	if v := versionOf(t, s); v != uint64(len(schema())) {
		t.Fatalf("version %d, want the latest, %d", v, len(schema()))
	}
	if _, err := s.Conversation(ctx, "t/c"); err != nil {
		t.Fatalf("conversation lost: %v", err)
	}
	if keys, err := s.APIKeys(ctx, "t"); err != nil || len(keys) != 0 {
		t.Fatalf("keys %v %v", keys, err)
	}
}
