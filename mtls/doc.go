// Package mtls authenticates the manager's internal calls with mutual
// TLS: the engine service (gRPC, 9501), the backing image managers (gRPC,
// 8000) and the backing image data sources (HTTP, 8001) answer only a
// caller whose certificate the cluster's internal CA signed, and their
// callers accept only a server with such a certificate.
//
// The CA lives in one Secret (CASecretName) that only the managers read:
// the first manager to start creates it (create if absent, so two that
// start together agree on one), and every manager keeps it (Keeper).
// Each manager signs a leaf for itself in memory and renews it before it
// expires. The backing image servers read a leaf from a folder: the
// servers' Secret (ServerSecretName, without the CA's key) mounted into
// their pods, or a folder the manager writes for its child processes.
//
// Every leaf carries one name, ServerName, and is good for both ends of
// a call: holding a leaf of the cluster CA is what makes a caller a
// Longhorn component. The CA is rotated before it expires: a new CA joins
// the trust bundle first and signs only once every holder of the bundle
// has had a day to see it; the old one is trusted until it expires.
package mtls
