// Package pvc holds the controller that follows the Kubernetes side of
// a Longhorn volume: the PersistentVolume the CSI driver (or a user) made
// for it and the claim bound to that PV.
//
// It writes two things, on the volume's owner only:
//
//   - status.kubernetesStatus: the PV's name and phase, the claim's
//     namespace and name, and lastPVCRefAt once the claim lets go of the
//     PV (Longhorn's kubernetes PV controller keeps the same fields);
//   - the volume's recurring-job labels, from a claim labelled
//     recurring-job.longhorn.io/source: enabled (Longhorn v1.5): the
//     claim's recurring-job.longhorn.io/<job> and
//     recurring-job-group.longhorn.io/<group> labels become the volume's,
//     added and removed as the claim's change, and the default-group rule
//     still holds (a claim that selects nothing puts its volume in the
//     default group). A volume whose claim is not labelled so keeps the
//     labels set on the volume.
//
// A PV is a Longhorn volume's when its CSI driver is driver.longhorn.io;
// its volumeHandle is the volume's name.
package pvc
