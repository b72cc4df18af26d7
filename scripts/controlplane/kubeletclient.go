package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// kubeletClientUser is the user the apiserver is to a kubelet (logs, exec,
// port-forward), as kubeadm names it.
const kubeletClientUser = "kube-apiserver-kubelet-client"

// kubeletClientFiles are, under the data folder, the CA a kubelet trusts
// for client certificates (its authentication.x509.clientCAFile) and the
// apiserver's certificate and key from it.
type kubeletClientFiles struct{ ca, cert, key string }

// ensureKubeletClientCert makes, once, a CA and the apiserver's client
// certificate for kubelets: with it the kubelet asks for a certificate
// (and, for everything else, a token it checks with the apiserver) instead
// of taking anonymous requests from whoever reaches its port.
func ensureKubeletClientCert(dataDir string) (kubeletClientFiles, error) {
	dir := filepath.Join(dataDir, "kubelet-client")
	f := kubeletClientFiles{ca: filepath.Join(dir, "ca.crt"), cert: filepath.Join(dir, "client.crt"), key: filepath.Join(dir, "client.key")}
	if _, err := os.Stat(f.key); err == nil {
		return f, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	now := time.Now()
	caTemplate := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "longhorn-local-kubelet-client-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTemplate, caTemplate, &caKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return f, err
	}
	clientKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return f, err
	}
	clientTemplate := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: kubeletClientUser},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	clientDER, err := x509.CreateCertificate(rand.Reader, clientTemplate, caCert, &clientKey.PublicKey, caKey)
	if err != nil {
		return f, err
	}
	keyDER, err := x509.MarshalECPrivateKey(clientKey)
	if err != nil {
		return f, err
	}
	// The key last: its presence says the set is complete.
	for _, file := range []struct {
		path string
		pem  *pem.Block
	}{
		{f.ca, &pem.Block{Type: "CERTIFICATE", Bytes: caDER}},
		{f.cert, &pem.Block{Type: "CERTIFICATE", Bytes: clientDER}},
		{f.key, &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}},
	} {
		if err := os.WriteFile(file.path, pem.EncodeToMemory(file.pem), 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}

// bindKubeletClient lets the apiserver's kubelet client user use the
// kubelet's API, as kubeadm's binding does: the kubelet asks the
// apiserver (SubjectAccessReview) whether a user may.
func bindKubeletClient(ctx context.Context, cfg *rest.Config) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "longhorn-local:kube-apiserver-kubelet-client"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClientUser}},
	}
	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind %s to system:kubelet-api-admin: %w", kubeletClientUser, err)
	}
	return nil
}
