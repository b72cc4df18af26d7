package main

import (
	"crypto/x509"
	"net"
	"os"
	"testing"
)

// The serving certificate verifies, with the CA, for every name and
// address a pod or the kubeconfig calls the apiserver by, and the CA stays
// the same across starts (the ca.crt pods hold stays valid) while the
// certificate is issued again.
func TestServingCertCoversTheServiceAndStaysUnderOneCA(t *testing.T) {
	dir := t.TempDir()
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 244, 0, 1), net.IPv4(10, 0, 0, 1)}
	first, err := ensureServingCert(dir, ips)
	if err != nil {
		t.Fatal(err)
	}
	caBefore, err := os.ReadFile(first.ca)
	if err != nil {
		t.Fatal(err)
	}
	certBefore, _ := os.ReadFile(first.cert)
	second, err := ensureServingCert(dir, ips)
	if err != nil {
		t.Fatal(err)
	}
	caAfter, _ := os.ReadFile(second.ca)
	certAfter, _ := os.ReadFile(second.cert)
	if string(caAfter) != string(caBefore) {
		t.Error("the CA changed at the second start")
	}
	if string(certAfter) == string(certBefore) {
		t.Error("the certificate was not issued again at the second start")
	}

	ca, _, err := loadCA(second.ca, second.caKey)
	if err != nil {
		t.Fatal(err)
	}
	// loadCA reads any certificate and its EC key: the serving pair too.
	certs, _, err := loadCA(second.cert, second.key)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{"127.0.0.1", "10.244.0.1", "10.0.0.1", "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"} {
		if _, err := certs.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("the certificate does not verify for %s: %v", name, err)
		}
	}
	if _, err := certs.Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.244.0.2"}); err == nil {
		t.Error("the certificate verifies for an address it was not issued for")
	}
}

func TestFirstServiceIP(t *testing.T) {
	ip, err := firstServiceIP("10.0.0.0/16")
	if err != nil || ip.String() != "10.0.0.1" {
		t.Errorf("firstServiceIP(10.0.0.0/16) = %v, %v; want 10.0.0.1", ip, err)
	}
	if _, err := firstServiceIP("fd00::/108"); err == nil {
		t.Error("an IPv6 range was taken")
	}
}
