// Package prom is how a package declares its Prometheus metrics: each one
// once, by name, help and labels, registered on the Registerer the service
// gives (none in most tests). A collector already registered under the same
// description (a second instance of a package on one registry, as tests
// and the replicas benchmark make) is shared rather than refused, so the
// counts of both instances add up under one name.
//
// The names and labels are the packages' own and do not change here:
// dashboards and tests rely on them.
package prom

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics declares the collectors of one package on reg. Declaring never
// fails on the spot; Err reports every registration that failed, once all
// are declared.
type Metrics struct {
	reg  prometheus.Registerer
	errs []error
}

// On returns a Metrics registering on reg; nil registers nothing, and the
// collectors still count.
func On(reg prometheus.Registerer) *Metrics { return &Metrics{reg: reg} }

// Counter declares a counter.
func (m *Metrics) Counter(name, help string) prometheus.Counter {
	return register(m, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

// CounterVec declares a counter with labels.
func (m *Metrics) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return register(m, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// Gauge declares a gauge.
func (m *Metrics) Gauge(name, help string) prometheus.Gauge {
	return register(m, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

// Histogram declares a histogram with the given bucket bounds.
func (m *Metrics) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return register(m, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}

// Err is every registration that failed, joined; nil when all took.
func (m *Metrics) Err() error { return errors.Join(m.errs...) }

// register registers c, or returns the collector of the same description
// already registered.
func register[C prometheus.Collector](m *Metrics, c C) C {
	if m.reg == nil {
		return c
	}
	err := m.reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	m.errs = append(m.errs, fmt.Errorf("registering metrics: %w", err))
	return c
}
