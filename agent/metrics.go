package agent

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the package's Prometheus counters. A nil *metrics counts
// nothing, so a service without a Registerer pays nothing.
type metrics struct {
	calls    *prometheus.CounterVec
	views    *prometheus.CounterVec
	refusals *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_agent_tool_calls_total",
			Help: "Tool calls through the governed path, by server, tool, caller (model or app) and result (ok, error, refused).",
		}, []string{"server", "tool", "caller", "result"}),
		views: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_agent_views_total",
			Help: "Views made from tool calls, by server.",
		}, []string{"server"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_agent_view_refusals_total",
			Help: "Views refused because their resource was not a valid MCP App, by server and reason.",
		}, []string{"server", "reason"}),
	}
	for _, c := range []**prometheus.CounterVec{&m.calls, &m.views, &m.refusals} {
		if err := reg.Register(*c); err != nil {
			// A second Service on the same registry shares the counters.
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return nil, fmt.Errorf("agent: metrics: %w", err)
			}
			existing, ok := are.ExistingCollector.(*prometheus.CounterVec)
			if !ok {
				return nil, fmt.Errorf("agent: metrics: %w", err)
			}
			*c = existing
		}
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
