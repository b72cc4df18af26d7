package pvc

import (
	corev1 "k8s.io/api/core/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// kubernetesStatus is what a volume's status.kubernetesStatus becomes,
// from what it was, the volume's PV (nil when it has none) and the time
// now (RFC 3339), which is what lastPVCRefAt records when the claim goes.
//
// A PV of another name starts the status over (a volume reused by a new
// PV); a bound PV names its claim; a PV whose claim let go of it, or a
// PV that is gone, keeps the claim's name with the time it went, so
// users can tell which claim the data was last used by.
func kubernetesStatus(prev longhorn.KubernetesStatus, pv *corev1.PersistentVolume, now string) longhorn.KubernetesStatus {
	ks := prev
	if pv == nil {
		if ks.PVCName != "" && ks.LastPVCRefAt == "" {
			ks.LastPVCRefAt = now
		}
		ks.PVName, ks.PVStatus = "", ""
		return ks
	}
	if ks.PVName != pv.Name {
		ks = longhorn.KubernetesStatus{}
	}
	wasBound := ks.PVStatus == string(corev1.VolumeBound)
	ks.PVName = pv.Name
	ks.PVStatus = string(pv.Status.Phase)
	switch {
	case pv.Spec.ClaimRef != nil && pv.Status.Phase == corev1.VolumeBound:
		ks.Namespace, ks.PVCName, ks.LastPVCRefAt = pv.Spec.ClaimRef.Namespace, pv.Spec.ClaimRef.Name, ""
	case ks.PVCName != "" && ks.LastPVCRefAt == "" && (wasBound || pv.Spec.ClaimRef == nil):
		ks.LastPVCRefAt = now
	}
	return ks
}

// boundClaim is the claim a volume's PV is bound to, when the claim in
// the cache is that PV's (its volumeName names the PV and, where the PV
// records it, its UID is the one the PV was bound to); nil otherwise.
func boundClaim(pv *corev1.PersistentVolume, claim *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	if pv == nil || claim == nil || pv.Spec.ClaimRef == nil || pv.Status.Phase != corev1.VolumeBound {
		return nil
	}
	ref := pv.Spec.ClaimRef
	if claim.Namespace != ref.Namespace || claim.Name != ref.Name || claim.Spec.VolumeName != pv.Name {
		return nil
	}
	if ref.UID != "" && ref.UID != claim.UID {
		return nil
	}
	return claim
}
