package replica

import (
	"fmt"
	"sort"
	"unicode/utf8"
)

// Bounds on a snapshot's labels: they live in every replica's metadata
// and in the Snapshot object the manager mirrors, which must stay far
// below etcd's object size limit.
const (
	MaxLabels     = 64
	MaxLabelKey   = 253
	MaxLabelValue = 1024
)

// CheckLabels says which label breaks which bound: at most MaxLabels
// labels; keys of 1 to MaxLabelKey letters, digits, '-', '_', '.' or '/';
// values of at most MaxLabelValue bytes of UTF-8.
func CheckLabels(labels map[string]string) error {
	if len(labels) > MaxLabels {
		return fmt.Errorf("labels: %d labels, at most %d allowed", len(labels), MaxLabels)
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if len(k) == 0 || len(k) > MaxLabelKey {
			return fmt.Errorf("labels: key %.64q must be a key of 1 to %d bytes", k, MaxLabelKey)
		}
		for _, c := range k {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == '/') {
				return fmt.Errorf("labels: key %.64q must hold only letters, digits, '-', '_', '.' and '/'", k)
			}
		}
		v := labels[k]
		if len(v) > MaxLabelValue {
			return fmt.Errorf("labels: the value of %q is %d bytes, at most %d bytes allowed", k, len(v), MaxLabelValue)
		}
		if !utf8.ValidString(v) {
			return fmt.Errorf("labels: the value of %q is not UTF-8", k)
		}
	}
	return nil
}
