package kit

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics counts reconciles and watches queue depths of the controllers,
// in the registry the API serves on /metrics.
type Metrics struct {
	registry    prometheus.Registerer
	reconciles  *prometheus.CounterVec
	engineCalls *prometheus.CounterVec
}

// NewMetrics registers the controller metrics in registry.
func NewMetrics(registry prometheus.Registerer) *Metrics {
	m := &Metrics{
		registry: registry,
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_manager_reconcile_total",
			Help: "Reconciles by controller and result (success, error).",
		}, []string{"controller", "result"}),
		engineCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "longhorn_manager_engine_calls_total",
			Help: "Calls of this node's engines' control API (snapshots, purge, backups, status reads), by method.",
		}, []string{"call"}),
	}
	registry.MustRegister(m.reconciles, m.engineCalls)
	return m
}

// EngineCall counts one call of an engine's control API.
func (m *Metrics) EngineCall(call string) {
	if m == nil {
		return
	}
	m.engineCalls.WithLabelValues(call).Inc()
}

// observe counts one reconcile of a controller.
func (m *Metrics) observe(controller string, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.reconciles.WithLabelValues(controller, result).Inc()
}

// watchQueue exports the depth of a controller's workqueue.
func (m *Metrics) watchQueue(controller string, depth func() int) {
	if m == nil {
		return
	}
	m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "longhorn_manager_workqueue_depth",
		Help:        "Keys waiting in a controller's workqueue.",
		ConstLabels: prometheus.Labels{"controller": controller},
	}, func() float64 { return float64(depth()) }))
}
