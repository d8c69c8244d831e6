package bot

import (
	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/internal/prom"
)

// metrics are the bot's Prometheus collectors. They always exist, so the
// code never checks for nil; they are registered only when a Registerer is
// given.
type metrics struct {
	turns            *prometheus.CounterVec
	turnDuration     prometheus.Histogram
	authFailures     *prometheus.CounterVec
	connectorRetries prometheus.Counter
	feedback         *prometheus.CounterVec
	throttled        *prometheus.CounterVec
	sendQueue        prometheus.Gauge
	paced            *prometheus.CounterVec
	// streamUpdatesSkipped counts stream updates left for the next one.
	streamUpdatesSkipped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	d := prom.On(reg)
	m := &metrics{
		turns: d.CounterVec("teamsbot_bot_turns_total",
			"Message turns by outcome: answered, failed, refused, duplicate, busy.", "outcome"),
		turnDuration: d.Histogram("teamsbot_bot_turn_duration_seconds",
			"Time from an accepted message to its answer reaching the Bot Connector.",
			[]float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}),
		authFailures: d.CounterVec("teamsbot_bot_auth_failures_total",
			"Inbound requests refused, by reason.", "reason"),
		connectorRetries: d.Counter("teamsbot_bot_connector_retries_total",
			"Bot Connector calls retried after a 429 or 5xx."),
		throttled: d.CounterVec("teamsbot_bot_connector_throttled_total",
			"Bot Connector answers that asked for a retry, by status: 429 (throttled), 412, 502, 503, 504.", "status"),
		sendQueue: d.Gauge("teamsbot_bot_send_queue_depth",
			"Sends waiting for their turn under Teams' per-conversation and per-tenant rate limits."),
		paced: d.CounterVec("teamsbot_bot_sends_paced_total",
			"Sends held back to stay under Teams' rate limits, by the limit that held them: conversation or tenant.", "limit"),
		streamUpdatesSkipped: d.Counter("teamsbot_bot_stream_updates_skipped_total",
			"Streaming updates not sent because their place under Teams' rate limits would come more than a second later; the next update carries their text."),
		feedback: d.CounterVec("teamsbot_bot_feedback_total",
			"Feedback on answers (Teams' feedback buttons), by reaction: like, dislike, unknown.", "reaction"),
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
