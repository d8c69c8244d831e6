package agent

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/internal/prom"
)

// metrics are the package's Prometheus counters. A nil *metrics counts
// nothing, so a service without a Registerer pays nothing.
type metrics struct {
	calls    *prometheus.CounterVec
	views    *prometheus.CounterVec
	refusals *prometheus.CounterVec
	elicits  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	// A second Service on the same registry shares the counters.
	d := prom.On(reg)
	m := &metrics{
		calls: d.CounterVec("teamsbot_agent_tool_calls_total",
			"Tool calls through the governed path, by server, tool, caller (model or app) and result (ok, error, refused).",
			"server", "tool", "caller", "result"),
		views: d.CounterVec("teamsbot_agent_views_total",
			"Views made from tool calls, by server.", "server"),
		refusals: d.CounterVec("teamsbot_agent_view_refusals_total",
			"Views refused because their resource was not a valid MCP App, by server and reason.", "server", "reason"),
		elicits: d.CounterVec("teamsbot_agent_elicitations_total",
			"Servers' requests for a person's input (elicitation) and for the model (sampling), by server and outcome (accept, decline, cancel, refused, unrelated, sampling_refused).",
			"server", "outcome"),
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	return m, nil
}

func (m *metrics) call(server, tool string, fromView bool, result string) {
	if m == nil {
		return
	}
	caller := "model"
	if fromView {
		caller = "app"
	}
	m.calls.WithLabelValues(server, tool, caller, result).Inc()
}

func (m *metrics) view(server string) {
	if m != nil {
		m.views.WithLabelValues(server).Inc()
	}
}

func (m *metrics) refused(server, reason string) {
	if m != nil {
		m.refusals.WithLabelValues(server, reason).Inc()
	}
}

func (m *metrics) elicited(server, outcome string) {
	if m != nil {
		m.elicits.WithLabelValues(server, outcome).Inc()
	}
}
