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
	// engineRestarts counts engines started again after the process they
	// ran in was lost; instanceManagerStarts, the instance managers this
	// manager started (the first one too).
	engineRestarts        prometheus.Counter
	instanceManagerStarts prometheus.Counter
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
		engineRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "longhorn_manager_engine_restarts_total",
			Help: "Engines of this node's volumes started again after the instance manager they ran in stopped.",
		}),
		instanceManagerStarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "longhorn_manager_instance_manager_starts_total",
			Help: "Instance managers this manager started on its node: the first, and each one that replaced one that had stopped.",
		}),
	}
	registry.MustRegister(m.reconciles, m.engineCalls, m.engineRestarts, m.instanceManagerStarts)
	return m
}

// EngineCall counts one call of an engine's control API.
func (m *Metrics) EngineCall(call string) {
	if m == nil {
		return
	}
	m.engineCalls.WithLabelValues(call).Inc()
}

// EngineRestart counts an engine started again after its instance manager
// stopped.
func (m *Metrics) EngineRestart() {
	if m != nil {
		m.engineRestarts.Inc()
	}
}

// InstanceManagerStart counts an instance manager this manager started.
func (m *Metrics) InstanceManagerStart() {
	if m != nil {
		m.instanceManagerStarts.Inc()
	}
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
