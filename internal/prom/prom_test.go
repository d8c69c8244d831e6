package prom_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"teamsbot/internal/prom"
)

// Two instances of a package declaring the same metrics on one registry
// share them: both count under the one name.
func TestSecondDeclarationShares(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := prom.On(reg), prom.On(reg)
	ca := a.CounterVec("teamsbot_test_total", "Test counts.", "result")
	cb := b.CounterVec("teamsbot_test_total", "Test counts.", "result")
	ga, gb := a.Gauge("teamsbot_test_depth", "Depth."), b.Gauge("teamsbot_test_depth", "Depth.")
	ha := a.Histogram("teamsbot_test_seconds", "Time.", []float64{1, 2})
	hb := b.Histogram("teamsbot_test_seconds", "Time.", []float64{1, 2})
	if err := errorsOf(a, b); err != "" {
		t.Fatal(err)
	}
	ca.WithLabelValues("ok").Inc()
	cb.WithLabelValues("ok").Inc()
	ga.Set(1)
	gb.Add(1)
	ha.Observe(1)
	hb.Observe(1)
	got := gather(t, reg)
	if got["teamsbot_test_total"] != 2 || got["teamsbot_test_depth"] != 2 || got["teamsbot_test_seconds"] != 2 || len(got) != 3 {
		t.Errorf("gathered %v; want each of the three at 2, from both instances", got)
	}
}

// A name declared again with other labels is a mistake, reported.
func TestConflictReported(t *testing.T) {
	reg := prometheus.NewRegistry()
	prom.On(reg).CounterVec("teamsbot_test_total", "Test counts.", "result")
	d := prom.On(reg)
	d.CounterVec("teamsbot_test_total", "Test counts.", "reason")
	if err := d.Err(); err == nil || !strings.Contains(err.Error(), "teamsbot_test_total") {
		t.Errorf("Err = %v, want the conflict named", err)
	}
}

// Without a registry the collectors still count.
func TestNoRegistry(t *testing.T) {
	d := prom.On(nil)
	c := d.Counter("teamsbot_test_total", "Test counts.")
	c.Inc()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if got := gather(t, reg); d.Err() != nil || got["teamsbot_test_total"] != 1 {
		t.Errorf("Err %v, gathered %v", d.Err(), got)
	}
}

func errorsOf(ds ...*prom.Metrics) string {
	var b strings.Builder
	for _, d := range ds {
		if err := d.Err(); err != nil {
			b.WriteString(err.Error())
		}
	}
	return b.String()
}

// gather reads each metric of reg: a counter's or gauge's value, a
// histogram's count of observations.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				got[mf.GetName()] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				got[mf.GetName()] += m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				got[mf.GetName()] += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return got
}
