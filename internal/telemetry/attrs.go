package telemetry

import "go.opentelemetry.io/otel/attribute"

// The attributes of the service's spans, besides the semantic conventions'
// HTTP ones (http.request.method, http.route, http.response.status_code)
// and error.type: OpenTelemetry's generative AI and MCP names where they
// fit, the service's own under teamsbot. docs/operations.md lists which
// span carries which. Each holds a name, a count, an outcome or an id;
// none ever holds a person's words, a tool's arguments or result, a token
// or a secret.
const (
	// A turn: one activity from Teams that the bot answers.
	ActivityType     = attribute.Key("teamsbot.activity.type")     // message, typing, ...
	ConversationKind = attribute.Key("teamsbot.conversation.kind") // personal, groupChat, channel
	TenantID         = attribute.Key("teamsbot.tenant.id")
	TurnOutcome      = attribute.Key("teamsbot.turn.outcome") // answered, failed, refused, command
	RunID            = attribute.Key("teamsbot.run.id")

	// A model call.
	GenAIOperation    = attribute.Key("gen_ai.operation.name") // chat, execute_tool
	GenAIModel        = attribute.Key("gen_ai.request.model")
	GenAIInputTokens  = attribute.Key("gen_ai.usage.input_tokens")
	GenAIOutputTokens = attribute.Key("gen_ai.usage.output_tokens")
	ModelKind         = attribute.Key("teamsbot.model.kind") // builtin, openai
	ModelStreamed     = attribute.Key("teamsbot.model.streamed")
	ModelRound        = attribute.Key("teamsbot.model.round")
	ModelToolCalls    = attribute.Key("teamsbot.model.tool_calls") // how many the reply asks for

	// A tool call on the governed path.
	GenAIToolName = attribute.Key("gen_ai.tool.name")
	MCPMethod     = attribute.Key("mcp.method.name") // tools/call
	MCPServer     = attribute.Key("teamsbot.mcp.server")
	ToolCaller    = attribute.Key("teamsbot.tool.caller")   // model, view
	ToolDecision  = attribute.Key("teamsbot.tool.decision") // allow, deny, none
	ToolReason    = attribute.Key("teamsbot.tool.reason")   // why it did not succeed, by name
	ToolResult    = attribute.Key("teamsbot.tool.result")   // ok, error, refused

	// A store commit.
	StoreOperation = attribute.Key("teamsbot.store.operation")

	// A call to the Bot Connector.
	ConnectorOperation = attribute.Key("teamsbot.connector.operation") // send, update, delete
	ConnectorRetries   = attribute.Key("teamsbot.connector.retries")
)

// The semantic conventions' HTTP attributes, for the parts that do not
// import the conventions themselves.
const (
	HTTPMethod = attribute.Key("http.request.method")
	HTTPStatus = attribute.Key("http.response.status_code")
)
