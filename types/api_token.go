package types

// A projected ServiceAccount token for the manager's API, bound to the
// audience the API accepts (--api-token-audience): the pods that call the
// API (the recurring-job pods, the CSI controller's, the UI's) mount it at
// APITokenDir and send APITokenDir/APITokenFile, so a token made for the
// API is no credential at the apiserver, and a pod's default token, made
// for the apiserver, none at the API.
const (
	APITokenVolume = "longhorn-api-token"
	APITokenDir    = "/var/run/secrets/longhorn/api"
	APITokenFile   = "token"
	// APITokenPath is where the token is read.
	APITokenPath = APITokenDir + "/" + APITokenFile
	// APITokenExpirationSeconds is the token's lifetime; the kubelet
	// renews it at 80% of it.
	APITokenExpirationSeconds = 3600
)

// The internal CA's certificates (the ConfigMap mtls.CAConfigMapName)
// mounted into the pods that call the manager's API over TLS (--api-tls):
// they check the API's certificate with ManagerCAPath.
const (
	ManagerCAVolume = "longhorn-internal-ca-cert"
	ManagerCADir    = "/var/run/secrets/longhorn/ca"
	ManagerCAPath   = ManagerCADir + "/ca.crt"
)
