package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"teamsbot/internal/pgtest"
	"teamsbot/store"
)

// backend is one of the store's backends as the contract suite sees it:
// location makes a fresh empty place for a store (a bbolt file path, a
// PostgreSQL database URL), and open opens a store there, again and again
// (a reopen is a restart).
type backend struct {
	name     string
	location func(t testing.TB) string
	open     func(ctx context.Context, location string, opts store.Options) (*store.Store, error)
}

func boltBackend() backend {
	return backend{
		name:     "bbolt",
		location: func(t testing.TB) string { return filepath.Join(t.TempDir(), "teamsbot.db") },
		open:     store.Open,
	}
}

func postgresBackend() backend {
	return backend{
		name:     "postgres",
		location: pgtest.Database,
		open:     store.OpenPostgres,
	}
}

// contract is the behaviour both backends must show, through the
// exported API alone: each test is run on each backend.
func contract() []struct {
	name string
	fn   func(t *testing.T, b backend)
} {
	return []struct {
		name string
		fn   func(t *testing.T, b backend)
	}{
		{"SaveRunRoundTrip", testSaveRunRoundTrip},
		{"SaveRunRefusesBadInputAndWritesNothing", testSaveRunRefusesBadInputAndWritesNothing},
		{"ReopenKeepsEverything", testReopenKeepsEverything},
		{"ExpiredViewIsNeverReturned", testExpiredViewIsNeverReturned},
		{"SharedHTMLKeptUntilItsLastViewIsSwept", testSharedHTMLKeptUntilItsLastViewIsSwept},
		{"SweepRemovesExactlyTheExpired", testSweepRemovesExactlyTheExpired},
		{"AuditQueries", testAuditQueries},
		{"ConcurrentSaveRunsAllLand", testConcurrentSaveRunsAllLand},
		{"CancelledContextWritesNothing", testCancelledContextWritesNothing},
		{"Conversations", testConversations},
		{"OverviewCountsTheRecords", testOverviewCountsTheRecords},
		{"SweepUsage", testSweepUsage},
		{"RunSweeperSweepsLogsAndStops", testRunSweeperSweepsLogsAndStops},
		{"RunSweeperStopsWhenStoreCloses", testRunSweeperStopsWhenStoreCloses},
		{"Ping", testPing},
		{"BindingsPutListDelete", testBindingsPutListDelete},
		{"BindingsForFindsUserGroupsAndAllAgentsOnly", testBindingsForFindsUserGroupsAndAllAgentsOnly},
		{"PutBindingIsIdempotent", testPutBindingIsIdempotent},
		{"BindingRefusesInvalidAndWritesNothing", testBindingRefusesInvalidAndWritesNothing},
		{"BindingChangesAndTheirAuditCommitTogether", testBindingChangesAndTheirAuditCommitTogether},
		{"TenantSettings", testTenantSettings},
		{"TenantSettingsAndTheirAuditCommitTogether", testTenantSettingsAndTheirAuditCommitTogether},
		{"PolicySetVersions", testPolicySetVersions},
		{"PolicySetAndItsAuditCommitTogether", testPolicySetAndItsAuditCommitTogether},
		{"AccessRecordsSurviveReopen", testAccessRecordsSurviveReopen},
		{"AuditPageFiltersAndPaging", testAuditPageFiltersAndPaging},
		{"AuditCursorIsBoundToItsQuery", testAuditCursorIsBoundToItsQuery},
		{"AuditCursorSurvivesReopen", testAuditCursorSurvivesReopen},
		{"ExportAudit", testExportAudit},
		{"Deliveries", testDeliveries},
		{"ArrivalsSurviveRestartAndWindow", testArrivalsSurviveRestartAndWindow},
		{"ArrivalsRecordedLater", testArrivalsRecordedLater},
		{"RetentionDeletesExactlyWhatIsPastIt", testRetentionDeletesExactlyWhatIsPastIt},
		{"RetentionDefaultsAndForever", testRetentionDefaultsAndForever},
		{"APIKeys", testAPIKeys},
		{"TriggersAndRemovedConversation", testTriggersAndRemovedConversation},
		{"SweepRevokedAPIKeys", testSweepRevokedAPIKeys},
		{"TriggerDueTimeClaimedOnce", testTriggerDueTimeClaimedOnce},
		{"ActiveViewsAndRecentRuns", testActiveViewsAndRecentRuns},
		{"RevokeView", testRevokeView},
		{"ConcurrentSettingsPutsOneWins", testConcurrentSettingsPutsOneWins},
		{"HTMLSurvivesConcurrentSweeps", testHTMLSurvivesConcurrentSweeps},
		{"MCPConnections", testMCPConnections},
		{"MCPServerUses", testMCPServerUses},
		{"MCPConnectionUseOneMinute", testMCPConnectionUseOneMinute},
		{"MCPConnectionRefusals", testMCPConnectionRefusals},
		{"MCPAuthRequests", testMCPAuthRequests},
		{"MCPAuthRequestRefusals", testMCPAuthRequestRefusals},
		{"MCPAuthRequestConcurrency", testMCPAuthRequestConcurrency},
		{"SweepMCPAuthRequests", testSweepMCPAuthRequests},
		{"Questions", testQuestions},
		{"QuestionRefusals", testQuestionRefusals},
		{"QuestionConcurrency", testQuestionConcurrency},
		{"SweepQuestions", testSweepQuestions},
		{"HistoryAppendAndRead", testHistoryAppendAndRead},
		{"HistoryBudgets", testHistoryBudgets},
		{"ClearHistory", testClearHistory},
		{"SweepHistory", testSweepHistory},
		{"HistoryRefusals", testHistoryRefusals},
		{"HistoryConcurrentAppends", testHistoryConcurrentAppends},
		{"SaveRunWithTurn", testSaveRunWithTurn},
	}
}

// runContract runs the contract suite on b, each test in parallel.
func runContract(t *testing.T, b backend) {
	for _, c := range contract() {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, b)
		})
	}
}

func TestContractBolt(t *testing.T) { runContract(t, boltBackend()) }

// TestContractPostgres needs the server of pgtest.EnvURL: it fails when
// there is none, except under -short.
func TestContractPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("PostgreSQL is left out under -short")
	}
	runContract(t, postgresBackend())
}
