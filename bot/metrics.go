package bot

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
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
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_bot_turns_total",
			Help: "Message turns by outcome: answered, failed, refused, duplicate, busy.",
		}, []string{"outcome"}),
		turnDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "teamsbot_bot_turn_duration_seconds",
			Help:    "Time from an accepted message to its answer reaching the Bot Connector.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_bot_auth_failures_total",
			Help: "Inbound requests refused, by reason.",
		}, []string{"reason"}),
		connectorRetries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "teamsbot_bot_connector_retries_total",
			Help: "Bot Connector calls retried after a 429 or 5xx.",
		}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_bot_connector_throttled_total",
			Help: "Bot Connector answers that asked for a retry, by status: 429 (throttled), 412, 502, 503, 504.",
		}, []string{"status"}),
		sendQueue: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "teamsbot_bot_send_queue_depth",
			Help: "Sends waiting for their turn under Teams' per-conversation and per-tenant rate limits.",
		}),
		paced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_bot_sends_paced_total",
			Help: "Sends held back to stay under Teams' rate limits, by the limit that held them: conversation or tenant.",
		}, []string{"limit"}),
		feedback: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_bot_feedback_total",
			Help: "Feedback on answers (Teams' feedback buttons), by reaction: like, dislike, unknown.",
		}, []string{"reaction"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.turns, m.turnDuration, m.authFailures, m.connectorRetries, m.feedback, m.throttled, m.sendQueue, m.paced} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}
