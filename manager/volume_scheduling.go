package manager

import (
	"context"
	"regexp"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// ParseDataLocality checks a volume's dataLocality against its number of
// replicas: disabled (also ""), or strict-local with one replica (its
// engine always on the replica's node, its I/O never on the network).
// best-effort is refused: it moves a replica to where the engine runs,
// which means rebuilding one there.
func ParseDataLocality(value string, replicas int) (longhorn.DataLocality, error) {
	switch d := longhorn.DataLocality(value); d {
	case "", longhorn.DataLocalityDisabled:
		return longhorn.DataLocalityDisabled, nil
	case longhorn.DataLocalityStrictLocal:
		if replicas != 1 {
			return "", invalid("dataLocality: strict-local keeps the volume's one replica where its engine runs, so numberOfReplicas must be 1, got %d", replicas)
		}
		return d, nil
	case longhorn.DataLocalityBestEffort:
		return "", invalid("dataLocality: best-effort moves a replica to the node the volume attaches to, which is not built yet; disabled and strict-local are taken")
	}
	return "", invalid("dataLocality: must be disabled, best-effort or strict-local, got %q", value)
}

// ParseSoftAntiAffinity checks a volume's replicaSoftAntiAffinity,
// replicaZoneSoftAntiAffinity or replicaDiskSoftAntiAffinity (field):
// ignored (also ""), enabled or disabled.
func ParseSoftAntiAffinity(field, value string) (longhorn.SoftAntiAffinity, error) {
	switch a := longhorn.SoftAntiAffinity(value); a {
	case "", longhorn.SoftAntiAffinityDefault:
		return longhorn.SoftAntiAffinityDefault, nil
	case longhorn.SoftAntiAffinityEnabled, longhorn.SoftAntiAffinityDisabled:
		return a, nil
	}
	return "", invalid("%s: must be ignored (the setting decides), enabled or disabled, got %q", field, value)
}

// SoftAntiAffinityOf is a volume's anti-affinity value as Longhorn shows
// it: ignored when unset.
func SoftAntiAffinityOf(a longhorn.SoftAntiAffinity) string {
	if a == "" {
		return string(longhorn.SoftAntiAffinityDefault)
	}
	return string(a)
}

// tagPattern is what a node's or a disk's tag, and so a selector's, may
// be: as Kubernetes' label values, without the empty one.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)

// ParseSelector checks a volume's nodeSelector or diskSelector (field):
// at most 32 tags, each of letters, digits, '.', '_' and '-' (beginning
// and ending with a letter or digit, at most 63), none twice.
func ParseSelector(field string, tags []string) ([]string, error) {
	if len(tags) > 32 {
		return nil, invalid("%s: at most 32 tags, got %d", field, len(tags))
	}
	seen := map[string]bool{}
	for _, t := range tags {
		if !tagPattern.MatchString(t) {
			return nil, invalid("%s: tag %q: must be 1 to 63 letters, digits, '.', '_' or '-', beginning and ending with a letter or digit", field, t)
		}
		if seen[t] {
			return nil, invalid("%s: tag %q is given twice", field, t)
		}
		seen[t] = true
	}
	return tags, nil
}

// UpdateVolumeSoftAntiAffinity sets one of the volume's anti-affinity
// overrides (Longhorn's updateReplicaSoftAntiAffinity,
// updateReplicaZoneSoftAntiAffinity, updateReplicaDiskSoftAntiAffinity):
// replicas placed from then on follow it; those placed stay where they
// are.
func (m *VolumeManager) UpdateVolumeSoftAntiAffinity(ctx context.Context, name, field, value string) (*longhorn.Volume, error) {
	a, err := ParseSoftAntiAffinity(field, value)
	if err != nil {
		return nil, err
	}
	return m.updateVolume(ctx, name, func(v *longhorn.Volume) bool {
		target := map[string]*longhorn.SoftAntiAffinity{
			"replicaSoftAntiAffinity":     &v.Spec.ReplicaSoftAntiAffinity,
			"replicaZoneSoftAntiAffinity": &v.Spec.ReplicaZoneSoftAntiAffinity,
			"replicaDiskSoftAntiAffinity": &v.Spec.ReplicaDiskSoftAntiAffinity,
		}[field]
		if target == nil || SoftAntiAffinityOf(*target) == string(a) {
			return false
		}
		*target = a
		return true
	})
}
