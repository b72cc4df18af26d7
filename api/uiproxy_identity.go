package api

import (
	"crypto/x509"
	"net/http"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
)

// The headers of Kubernetes' user impersonation, which the UI sets for a
// user its authenticating proxy vouched for and the manager honours from
// a caller allowed to impersonate (see kubeAuth.impersonate).
const (
	impersonateUserHeader  = "Impersonate-User"
	impersonateGroupHeader = "Impersonate-Group"
	impersonateUIDHeader   = "Impersonate-Uid"
	impersonateExtraPrefix = "Impersonate-Extra-"
)

// The identity headers an authenticating proxy sets when none are named,
// as Kubernetes' documentation of --requestheader-*-headers uses them.
var (
	DefaultUserHeaders  = []string{"X-Remote-User"}
	DefaultGroupHeaders = []string{"X-Remote-Group"}
)

// UIIdentity is how the UI's server learns who a user is from the
// cluster's authenticating proxy (an ingress that logs users in), as
// kube-apiserver does with --requestheader-client-ca-file: the identity
// headers are believed only from a client that presents a certificate
// ClientCA signed for client authentication (and, when AllowedNames is
// set, with one of those common names). From any other client they are
// removed, never passed on. A user so named reaches the manager as the
// UI's own account (Token) asking to impersonate that user and groups;
// the manager honours it only when the UI's account may impersonate them
// (Kubernetes RBAC), and then authorizes the request as the user.
type UIIdentity struct {
	ClientCA     *x509.CertPool
	AllowedNames []string
	// UserHeaders are read in order, the first one set names the user;
	// every value of GroupHeaders is a group. Empty: the defaults above.
	UserHeaders, GroupHeaders []string
	// Token is the UI's own bearer token (its ServiceAccount's, read again
	// on each request as the kubelet rotates it).
	Token func() string
}

func (id *UIIdentity) userHeaders() []string {
	if id == nil || len(id.UserHeaders) == 0 {
		return DefaultUserHeaders
	}
	return id.UserHeaders
}

func (id *UIIdentity) groupHeaders() []string {
	if id == nil || len(id.GroupHeaders) == 0 {
		return DefaultGroupHeaders
	}
	return id.GroupHeaders
}

// strip removes from h every identity header and impersonation header: a
// browser or a tenant's pod can send them, and only the UI sets them on
// what it passes on, for a user its proxy vouched for.
func (id *UIIdentity) strip(h http.Header) {
	for _, name := range append(slices.Clone(id.userHeaders()), id.groupHeaders()...) {
		h.Del(name)
	}
	for name := range h {
		if strings.HasPrefix(http.CanonicalHeaderKey(name), "Impersonate-") {
			delete(h, name)
		}
	}
}

// vouched returns the user and groups the authenticating proxy names in
// r, and whether r comes from that proxy (a client certificate of
// ClientCA, of an allowed name) and names a user. A request that carries
// identity headers but is not from the proxy is logged: its headers are
// dropped.
func (id *UIIdentity) vouched(r *http.Request) (string, []string, bool) {
	user := ""
	for _, name := range id.userHeaders() {
		if user = strings.TrimSpace(r.Header.Get(name)); user != "" {
			break
		}
	}
	if user == "" {
		return "", nil, false
	}
	if err := id.verifyProxy(r); err != nil {
		logrus.WithFields(logrus.Fields{"client": r.RemoteAddr, "user": user, "reason": err}).Debug("Dropped identity headers from a client that is not the authenticating proxy")
		return "", nil, false
	}
	var groups []string
	for _, name := range id.groupHeaders() {
		for _, g := range r.Header.Values(name) {
			if g = strings.TrimSpace(g); g != "" {
				groups = append(groups, g)
			}
		}
	}
	return user, groups, true
}

// verifyProxy checks that r came over TLS from a client whose
// certificate ClientCA signed for client authentication, with one of
// AllowedNames as its common name when any are given.
func (id *UIIdentity) verifyProxy(r *http.Request) error {
	if id == nil || id.ClientCA == nil {
		return errString("no client CA is configured (--requestheader-client-ca-file)")
	}
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return errString("no client certificate")
	}
	leaf := r.TLS.PeerCertificates[0]
	intermediates := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: id.ClientCA, Intermediates: intermediates,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return err
	}
	if len(id.AllowedNames) > 0 && !slices.Contains(id.AllowedNames, leaf.Subject.CommonName) {
		return errString("client certificate name " + leaf.Subject.CommonName + " is not one of --requestheader-allowed-names")
	}
	return nil
}

type errString string

func (e errString) Error() string { return string(e) }
