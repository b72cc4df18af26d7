package types

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The settings that place the pods the manager creates (recurring job
// CronJobs, backing image servers), in Longhorn's formats.

// reservedTolerationKey may not appear in a taint-toleration key: as in
// Longhorn, keys of Kubernetes' own taints are left to Kubernetes.
const reservedTolerationKey = "kubernetes.io"

var taintEffects = map[corev1.TaintEffect]bool{
	corev1.TaintEffectNoSchedule:       true,
	corev1.TaintEffectPreferNoSchedule: true,
	corev1.TaintEffectNoExecute:        true,
}

// settingEntries splits a `;`-separated setting value into its trimmed,
// non-empty entries.
func settingEntries(value string) []string {
	var out []string
	for _, e := range strings.Split(value, ";") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// ParseTaintToleration parses the taint-toleration setting:
// `key1=value1:NoSchedule; key2:NoExecute`. Each entry is `key=value:effect`
// (operator Equal), `key:effect` (operator Exists, any value) or `:effect`
// (operator Exists with no key: every taint of that effect). The effect is
// NoSchedule, PreferNoSchedule or NoExecute. Empty means no tolerations.
func ParseTaintToleration(value string) ([]corev1.Toleration, error) {
	var out []corev1.Toleration
	seen := map[string]bool{}
	for _, entry := range settingEntries(value) {
		i := strings.LastIndex(entry, ":")
		if i < 0 {
			return nil, fmt.Errorf("toleration %q must be key[=value]:effect", entry)
		}
		kv, effect := strings.TrimSpace(entry[:i]), corev1.TaintEffect(strings.TrimSpace(entry[i+1:]))
		if !taintEffects[effect] {
			return nil, fmt.Errorf("toleration %q: effect %q must be NoSchedule, PreferNoSchedule or NoExecute", entry, effect)
		}
		t := corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: effect}
		key := kv
		if k, v, ok := strings.Cut(kv, "="); ok {
			key = strings.TrimSpace(k)
			t.Operator, t.Value = corev1.TolerationOpEqual, strings.TrimSpace(v)
			if key == "" {
				return nil, fmt.Errorf("toleration %q: a value needs a key", entry)
			}
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				return nil, fmt.Errorf("toleration %q: value %q is not a valid taint value: %s", entry, t.Value, strings.Join(errs, "; "))
			}
		}
		if key != "" {
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				return nil, fmt.Errorf("toleration %q: key %q is not a valid taint key: %s", entry, key, strings.Join(errs, "; "))
			}
			if strings.Contains(key, reservedTolerationKey) {
				return nil, fmt.Errorf("toleration %q: key %q must not contain %q (reserved for Kubernetes' own taints)", entry, key, reservedTolerationKey)
			}
		}
		t.Key = key
		id := t.Key + "\x00" + string(t.Effect)
		if seen[id] {
			return nil, fmt.Errorf("toleration %q: key %q with effect %s is given twice", entry, key, effect)
		}
		seen[id] = true
		out = append(out, t)
	}
	return out, nil
}

// ParseNodeSelector parses the system-managed-components-node-selector
// setting: `label-key1:label-value1;label-key2:label-value2`, each key a
// qualified label name and each value a label value (may be empty). Empty
// means no node selector (nil).
func ParseNodeSelector(value string) (map[string]string, error) {
	var out map[string]string
	for _, entry := range settingEntries(value) {
		k, v, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fmt.Errorf("node selector entry %q must be label-key:label-value", entry)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("node selector entry %q: label key %q is invalid: %s", entry, k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("node selector entry %q: label value %q is invalid: %s", entry, v, strings.Join(errs, "; "))
		}
		if out == nil {
			out = map[string]string{}
		}
		if old, dup := out[k]; dup && old != v {
			return nil, fmt.Errorf("node selector entry %q: label key %q is given twice with different values", entry, k)
		}
		out[k] = v
	}
	return out, nil
}

// checkObjectName checks a setting that names an object (a PriorityClass,
// a Secret): empty means none, anything else a DNS subdomain name.
func checkObjectName(what string) func(string) error {
	return func(value string) error {
		if value == "" {
			return nil
		}
		if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
			return fmt.Errorf("value %q must be a %s name (a DNS subdomain: lower case letters, digits, '-' and '.'): %s", value, what, strings.Join(errs, "; "))
		}
		return nil
	}
}

func checkTaintToleration(value string) error {
	_, err := ParseTaintToleration(value)
	return err
}

func checkNodeSelector(value string) error {
	_, err := ParseNodeSelector(value)
	return err
}

// PodPlacement is what the pod settings put on a pod the manager creates.
type PodPlacement struct {
	Tolerations       []corev1.Toleration
	NodeSelector      map[string]string
	PriorityClassName string
	// RegistrySecret names the Secret for image pulls; empty means none.
	RegistrySecret string
}

// ImagePullSecrets is the pod's imagePullSecrets: the registry secret, or nil.
func (p PodPlacement) ImagePullSecrets() []corev1.LocalObjectReference {
	if p.RegistrySecret == "" {
		return nil
	}
	return []corev1.LocalObjectReference{{Name: p.RegistrySecret}}
}

// ParsePodPlacement reads the four pod settings from their values (get
// returns a setting's value). A value that does not parse is left out,
// not fatal: the rest still applies, and each such setting is named in
// the returned error so the caller can warn.
func ParsePodPlacement(get func(SettingName) (string, error)) (PodPlacement, error) {
	var p PodPlacement
	var bad []string
	read := func(name SettingName, parse func(string) error) {
		v, err := get(name)
		if err == nil {
			err = parse(v)
		}
		if err != nil {
			bad = append(bad, fmt.Sprintf("setting %s: %v", name, err))
		}
	}
	read(SettingNameTaintToleration, func(v string) (err error) { p.Tolerations, err = ParseTaintToleration(v); return })
	read(SettingNameSystemManagedComponentsNodeSelector, func(v string) (err error) { p.NodeSelector, err = ParseNodeSelector(v); return })
	read(SettingNamePriorityClass, func(v string) error {
		if err := checkObjectName("PriorityClass")(v); err != nil {
			return err
		}
		p.PriorityClassName = v
		return nil
	})
	read(SettingNameRegistrySecret, func(v string) error {
		if err := checkObjectName("Secret")(v); err != nil {
			return err
		}
		p.RegistrySecret = v
		return nil
	})
	if len(bad) > 0 {
		sort.Strings(bad)
		return p, fmt.Errorf("%s; left out of the pods", strings.Join(bad, "; "))
	}
	return p, nil
}
