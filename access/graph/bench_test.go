package graph_test

import (
	"testing"
	"time"
)

// BenchmarkMemberGroupsWarm is a lookup answered from the cache.
func BenchmarkMemberGroupsWarm(b *testing.B) {
	e := newEnv(b, nil)
	ctx := ctxFor(b, time.Hour)
	groups := []string{readers, team, admins}
	if _, err := e.client.MemberGroups(ctx, tenantA, bob, groups); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := e.client.MemberGroups(ctx, tenantA, bob, groups); err != nil {
			b.Fatal(err)
		}
	}
	if n := e.fake.Counts().CheckMemberGroups; n != 1 {
		b.Fatalf("%d Graph calls, want 1", n)
	}
}

// BenchmarkMemberGroupsCold is a lookup the cache cannot answer: one
// checkMemberGroups call over HTTPS on loopback to the fake, with the
// token and the connection already there.
func BenchmarkMemberGroupsCold(b *testing.B) {
	e := newEnv(b, nil)
	ctx := ctxFor(b, time.Hour)
	if _, err := e.client.MemberGroups(ctx, tenantA, bob, []string{readers}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		// A group never asked about before makes a new question.
		if _, err := e.client.MemberGroups(ctx, tenantA, bob, []string{readers, guid(0xbe, i)}); err != nil {
			b.Fatal(err)
		}
	}
	if n := e.fake.Counts().CheckMemberGroups; n != i+1 {
		b.Fatalf("%d Graph calls for %d lookups", n, i+1)
	}
}
