package metrics

import (
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const monitoringDir = "../package/monitoring/"

func promtool(t *testing.T, args ...string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil && testing.Short() {
		t.Skipf("promtool is not installed: not needed in the fast tier (-short)")
	}
	if err != nil {
		t.Fatalf("the rule tests need promtool (Debian's prometheus package): run scripts/install-test-deps.sh (%v)", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = monitoringDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestAlertRules checks the rules file and runs its unit tests: each alert
// fires on the series of its case, and only then.
func TestAlertRules(t *testing.T) {
	promtool(t, "check", "rules", "prometheus-rules.yaml")
	promtool(t, "test", "rules", "prometheus-rules.test.yaml")
}

func readYAML(t *testing.T, name string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(monitoringDir + name)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := yaml.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// TestPrometheusRuleIsTheRulesFile: the PrometheusRule carries the same
// groups as the plain rules file.
func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	plain := readYAML(t, "prometheus-rules.yaml")
	cr := readYAML(t, "prometheusrule.yaml")
	if cr["kind"] != "PrometheusRule" || cr["apiVersion"] != "monitoring.coreos.com/v1" {
		t.Fatalf("prometheusrule.yaml is a %v %v", cr["apiVersion"], cr["kind"])
	}
	spec, _ := cr["spec"].(map[string]any)
	if !reflect.DeepEqual(spec["groups"], plain["groups"]) {
		t.Fatal("prometheusrule.yaml's spec.groups differ from prometheus-rules.yaml's groups: edit both")
	}
}

var metricName = regexp.MustCompile(`longhorn_[a-z_]+`)

// described is every metric name the collector describes, with the
// series names of its histograms.
func described() map[string]bool {
	names := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, d := range allDescs {
		m := fqName.FindStringSubmatch(d.String())
		names[m[1]] = true
		if m[1] == "longhorn_recurring_job_run_duration_seconds" {
			for _, s := range []string{"_bucket", "_count", "_sum"} {
				names[m[1]+s] = true
			}
		}
	}
	return names
}

// TestRulesAndDashboardUseServedMetrics: every longhorn_ metric the rules
// and the dashboard query is one the collector serves, so a renamed
// metric cannot leave an alert that never fires.
func TestRulesAndDashboardUseServedMetrics(t *testing.T) {
	served := described()
	for _, name := range []string{"prometheus-rules.yaml", "grafana-dashboard.json"} {
		raw, err := os.ReadFile(monitoringDir + name)
		if err != nil {
			t.Fatal(err)
		}
		var unknown []string
		used := 0
		for _, m := range metricName.FindAllString(string(raw), -1) {
			used++
			if !served[m] {
				unknown = append(unknown, m)
			}
		}
		sort.Strings(unknown)
		if len(unknown) > 0 || used == 0 {
			t.Errorf("%s queries %d metrics; not served: %v", name, used, unknown)
		}
	}
}

// TestPodMonitorScrapesTheManagerPods: the PodMonitor selects the
// DaemonSet's pods and names a port their container has.
func TestPodMonitorScrapesTheManagerPods(t *testing.T) {
	pm := readYAML(t, "podmonitor.yaml")
	raw, err := os.ReadFile("../package/longhorn-manager.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds map[string]any
	if err := yaml.Unmarshal([]byte(strings.SplitN(string(raw), "\n---", 2)[0]), &ds); err != nil {
		t.Fatal(err)
	}
	get := func(m any, path ...string) any {
		for _, p := range path {
			mm, _ := m.(map[string]any)
			m = mm[p]
		}
		return m
	}
	if ds["kind"] != "DaemonSet" {
		t.Fatalf("the first document of longhorn-manager.yaml is a %v", ds["kind"])
	}
	podLabels, _ := get(ds, "spec", "template", "metadata", "labels").(map[string]any)
	for k, v := range get(pm, "spec", "selector", "matchLabels").(map[string]any) {
		if podLabels[k] != v {
			t.Errorf("the PodMonitor selects %s=%v; the manager pods have %v", k, v, podLabels)
		}
	}
	ports := map[any]bool{}
	for _, c := range get(ds, "spec", "template", "spec", "containers").([]any) {
		// The CSI containers beside the manager have no ports.
		cports, _ := get(c, "ports").([]any)
		for _, p := range cports {
			ports[get(p, "name")] = true
		}
	}
	for _, ep := range get(pm, "spec", "podMetricsEndpoints").([]any) {
		if !ports[get(ep, "port")] {
			t.Errorf("the PodMonitor scrapes port %v; the manager container has %v", get(ep, "port"), ports)
		}
	}
}
