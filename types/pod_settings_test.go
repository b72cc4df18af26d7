package types

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestParseTaintToleration(t *testing.T) {
	got, err := ParseTaintToleration(" key1=value1:NoSchedule; key2:NoExecute ;:PreferNoSchedule; example.com/gpu=:NoSchedule;")
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.Toleration{
		{Key: "key1", Operator: corev1.TolerationOpEqual, Value: "value1", Effect: corev1.TaintEffectNoSchedule},
		{Key: "key2", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectPreferNoSchedule},
		{Key: "example.com/gpu", Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffectNoSchedule},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	for _, empty := range []string{"", " ", ";;"} {
		if got, err := ParseTaintToleration(empty); err != nil || got != nil {
			t.Errorf("%q: want no tolerations, got %v, %v", empty, got, err)
		}
	}
	for _, c := range []struct{ value, rule string }{
		{"key1=value1", "must be key[=value]:effect"},
		{"key1:NoRun", "must be NoSchedule, PreferNoSchedule or NoExecute"},
		{"key1:", "must be NoSchedule, PreferNoSchedule or NoExecute"},
		{"=v:NoSchedule", "a value needs a key"},
		{"bad key:NoSchedule", "not a valid taint key"},
		{"k=bad value:NoSchedule", "not a valid taint value"},
		{"node-role.kubernetes.io/control-plane:NoSchedule", "must not contain \"kubernetes.io\""},
		{"k:NoSchedule; k=v:NoSchedule", "given twice"},
	} {
		if _, err := ParseTaintToleration(c.value); err == nil || !strings.Contains(err.Error(), c.rule) {
			t.Errorf("%q: want an error saying %q, got %v", c.value, c.rule, err)
		}
	}
}

func TestParseNodeSelector(t *testing.T) {
	got, err := ParseNodeSelector("label-key1:label-value1; example.com/zone : a ;empty:")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"label-key1": "label-value1", "example.com/zone": "a", "empty": ""}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if got, err := ParseNodeSelector(""); err != nil || got != nil {
		t.Fatalf("empty: want nil, got %v, %v", got, err)
	}
	for _, c := range []struct{ value, rule string }{
		{"label-key1=label-value1", "must be label-key:label-value"},
		{"bad key:v", "label key \"bad key\" is invalid"},
		{":v", "label key \"\" is invalid"},
		{"k:bad value", "label value \"bad value\" is invalid"},
		{"k:a:b", "label value \"a:b\" is invalid"},
		{"k:a;k:b", "given twice"},
	} {
		if _, err := ParseNodeSelector(c.value); err == nil || !strings.Contains(err.Error(), c.rule) {
			t.Errorf("%q: want an error saying %q, got %v", c.value, c.rule, err)
		}
	}
}

func TestPodSettingsValidationNamesTheSettingAndRule(t *testing.T) {
	for _, c := range []struct {
		setting    SettingName
		value, msg string
	}{
		{SettingNameTaintToleration, "k:Never", "setting taint-toleration: toleration \"k:Never\": effect"},
		{SettingNameSystemManagedComponentsNodeSelector, "a=b", "setting system-managed-components-node-selector: node selector entry"},
		{SettingNamePriorityClass, "High_Priority", "setting priority-class: value \"High_Priority\" must be a PriorityClass name"},
		{SettingNameRegistrySecret, "my secret", "setting registry-secret: value \"my secret\" must be a Secret name"},
	} {
		err := ValidateSetting(c.setting, c.value)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s=%q: want an error containing %q, got %v", c.setting, c.value, c.msg, err)
		}
	}
	for name, value := range map[SettingName]string{
		SettingNamePriorityClass:  "longhorn-critical",
		SettingNameRegistrySecret: "regcred.v2",
	} {
		if err := ValidateSetting(name, value); err != nil {
			t.Errorf("%s=%q: %v", name, value, err)
		}
	}
}

func TestParsePodPlacement(t *testing.T) {
	values := map[SettingName]string{
		SettingNameTaintToleration:                     "k=v:NoSchedule",
		SettingNameSystemManagedComponentsNodeSelector: "disk:ssd",
		SettingNamePriorityClass:                       "high",
		SettingNameRegistrySecret:                      "regcred",
	}
	get := func(n SettingName) (string, error) { return values[n], nil }
	p, err := ParsePodPlacement(get)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Tolerations) != 1 || p.NodeSelector["disk"] != "ssd" || p.PriorityClassName != "high" ||
		!reflect.DeepEqual(p.ImagePullSecrets(), []corev1.LocalObjectReference{{Name: "regcred"}}) {
		t.Fatalf("placement %+v", p)
	}

	// A bad value is left out and named; the others still apply.
	values[SettingNameTaintToleration] = "k:Sometimes"
	values[SettingNameRegistrySecret] = "Reg Cred"
	p, err = ParsePodPlacement(get)
	if err == nil || !strings.Contains(err.Error(), "setting taint-toleration") || !strings.Contains(err.Error(), "setting registry-secret") {
		t.Fatalf("want both bad settings named, got %v", err)
	}
	if p.Tolerations != nil || p.ImagePullSecrets() != nil || p.NodeSelector["disk"] != "ssd" || p.PriorityClassName != "high" {
		t.Fatalf("placement %+v", p)
	}

	// A setting that cannot be read is left out too.
	p, err = ParsePodPlacement(func(SettingName) (string, error) { return "", errors.New("cache not synced") })
	if err == nil || !reflect.DeepEqual(p, PodPlacement{}) {
		t.Fatalf("got %+v, %v", p, err)
	}
}

// Whatever the value, parsing answers without panicking, and what it
// accepts the setting's rule accepts.
func FuzzParsePodSettings(f *testing.F) {
	for _, s := range []string{"", "key1=value1:NoSchedule; key2:NoExecute", ":NoSchedule", "a:b;c:d", "=:", ";;:", "k=v=w:NoExecute"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		if _, err := ParseTaintToleration(value); (err == nil) != (ValidateSetting(SettingNameTaintToleration, value) == nil) {
			t.Fatalf("%q: parse and validation disagree", value)
		}
		if _, err := ParseNodeSelector(value); (err == nil) != (ValidateSetting(SettingNameSystemManagedComponentsNodeSelector, value) == nil) {
			t.Fatalf("%q: parse and validation disagree", value)
		}
	})
}
