package triggers

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the package's Prometheus collectors; they always exist and
// are registered only when a Registerer is given.
type metrics struct {
	runs     *prometheus.CounterVec
	refusals *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_triggered_runs_total",
			Help: "Runs without a person, by how they started (api, schedule) and result (ok, failed, removed, error).",
		}, []string{"kind", "result"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "teamsbot_api_key_refusals_total",
			Help: "Runs API calls refused, by reason.",
		}, []string{"reason"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.runs, m.refusals} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return m, nil
}
