package triggers

import (
	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/internal/prom"
)

// metrics are the package's Prometheus collectors; they always exist and
// are registered only when a Registerer is given.
type metrics struct {
	runs     *prometheus.CounterVec
	refusals *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	d := prom.On(reg)
	m := &metrics{
		runs: d.CounterVec("teamsbot_triggered_runs_total",
			"Runs without a person, by how they started (api, schedule) and result (ok, failed, removed, error).", "kind", "result"),
		refusals: d.CounterVec("teamsbot_api_key_refusals_total",
			"Runs API calls refused, by reason.", "reason"),
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return m, nil
}
