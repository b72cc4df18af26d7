// Package v1beta2 is the v1beta2 version of Longhorn's custom resources
// (API group longhorn.io): the types, their validation markers (read by
// controller-gen to write the CRDs) and the generation tags for the
// clientset, listers and informers.
//
// +k8s:deepcopy-gen=package
// +groupName=longhorn.io
package v1beta2
