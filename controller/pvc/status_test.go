package pvc

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func pv(name string, phase corev1.PersistentVolumePhase, claimNS, claimName string) *corev1.PersistentVolume {
	p := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PersistentVolumeStatus{Phase: phase}}
	if claimName != "" {
		p.Spec.ClaimRef = &corev1.ObjectReference{Namespace: claimNS, Name: claimName, UID: "uid-" + k8stypes.UID(claimName)}
	}
	return p
}

func TestKubernetesStatus(t *testing.T) {
	const now, earlier = "2026-11-26T12:00:00Z", "2026-11-25T08:00:00Z"
	bound := longhorn.KubernetesStatus{PVName: "pv1", PVStatus: "Bound", Namespace: "apps", PVCName: "data"}
	for _, tc := range []struct {
		name string
		prev longhorn.KubernetesStatus
		pv   *corev1.PersistentVolume
		want longhorn.KubernetesStatus
	}{
		{"no PV, never had one: empty", longhorn.KubernetesStatus{}, nil, longhorn.KubernetesStatus{}},
		{"a bound PV names its claim", longhorn.KubernetesStatus{}, pv("pv1", corev1.VolumeBound, "apps", "data"), bound},
		{"an available PV has no claim yet", longhorn.KubernetesStatus{}, pv("pv1", corev1.VolumeAvailable, "", ""),
			longhorn.KubernetesStatus{PVName: "pv1", PVStatus: "Available"}},
		{"a released PV keeps the claim, with when it went", bound, pv("pv1", corev1.VolumeReleased, "apps", "data"),
			longhorn.KubernetesStatus{PVName: "pv1", PVStatus: "Released", Namespace: "apps", PVCName: "data", LastPVCRefAt: now}},
		{"the time the claim went is kept", longhorn.KubernetesStatus{PVName: "pv1", PVStatus: "Released", Namespace: "apps", PVCName: "data", LastPVCRefAt: earlier},
			pv("pv1", corev1.VolumeReleased, "apps", "data"),
			longhorn.KubernetesStatus{PVName: "pv1", PVStatus: "Released", Namespace: "apps", PVCName: "data", LastPVCRefAt: earlier}},
		{"a claimRef removed from the PV", bound, pv("pv1", corev1.VolumeAvailable, "", ""),
			longhorn.KubernetesStatus{PVName: "pv1", PVStatus: "Available", Namespace: "apps", PVCName: "data", LastPVCRefAt: now}},
		{"a PV bound again clears lastPVCRefAt", longhorn.KubernetesStatus{PVName: "pv1", PVStatus: "Released", Namespace: "apps", PVCName: "data", LastPVCRefAt: earlier},
			pv("pv1", corev1.VolumeBound, "apps", "data2"),
			longhorn.KubernetesStatus{PVName: "pv1", PVStatus: "Bound", Namespace: "apps", PVCName: "data2"}},
		{"a deleted PV: the claim is kept with when it went", bound, nil,
			longhorn.KubernetesStatus{Namespace: "apps", PVCName: "data", LastPVCRefAt: now}},
		{"a new PV for the volume starts over", longhorn.KubernetesStatus{Namespace: "apps", PVCName: "data", LastPVCRefAt: earlier},
			pv("pv2", corev1.VolumeBound, "other", "copy"),
			longhorn.KubernetesStatus{PVName: "pv2", PVStatus: "Bound", Namespace: "other", PVCName: "copy"}},
		{"a pending PV bound to a claim not yet bound", longhorn.KubernetesStatus{}, pv("pv1", corev1.VolumePending, "apps", "data"),
			longhorn.KubernetesStatus{PVName: "pv1", PVStatus: "Pending"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := kubernetesStatus(tc.prev, tc.pv, now); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBoundClaim(t *testing.T) {
	p := pv("pv1", corev1.VolumeBound, "apps", "data")
	claim := func(ns, name, volume, uid string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID(uid)},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
	}
	for _, tc := range []struct {
		name  string
		pv    *corev1.PersistentVolume
		claim *corev1.PersistentVolumeClaim
		want  bool
	}{
		{"the claim the PV is bound to", p, claim("apps", "data", "pv1", "uid-data"), true},
		{"a claim of the same name made again (another UID)", p, claim("apps", "data", "pv1", "other"), false},
		{"a claim naming another PV", p, claim("apps", "data", "pv9", "uid-data"), false},
		{"a PV not bound", pv("pv1", corev1.VolumeReleased, "apps", "data"), claim("apps", "data", "pv1", "uid-data"), false},
		{"no claim", p, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := boundClaim(tc.pv, tc.claim) != nil; got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
