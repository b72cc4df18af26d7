package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/util/compatibility"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	apiserveroptions "k8s.io/kubernetes/cmd/kube-apiserver/app/options"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// serviceAccountIssuer is the issuer of the cluster's account tokens, as
// on a kubeadm cluster.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// serviceAccountKeyFile is the account-token signing key's file in the
// data folder, which the controller manager's token controller signs with
// too.
const serviceAccountKeyFile = "service-account.key"

// serviceClusterIPRange is the Services' addresses; the kubernetes Service
// has the first.
const serviceClusterIPRange = "10.0.0.0/16"

// servingCAFile is the CA of the apiserver's serving certificate in the
// data folder, which the controller manager publishes as the
// kube-root-ca.crt ConfigMap that pods' token volumes hold.
func servingCAFile(dataDir string) string {
	return filepath.Join(dataDir, "apiserver", "serving-ca.crt")
}

// startClusterAPIServer starts kube-apiserver as startAPIServer does, but
// with the cluster's own account-token signing key (made once, kept in
// dataDir): the test server signs with a key published in Kubernetes'
// sources, with which anyone who reaches the apiserver could make a token
// of any account, and a node runs what such tokens ask for. It is also the
// kubelet's client, with a certificate of its own (kubeletclient.go). The steps
// follow the test server's (kube-apiserver/app/testing), without its
// test-only checks.
//
// It serves on 127.0.0.1, where the kubeconfig points, and, when advertise
// is not nil, on that address too, which it advertises as the kubernetes
// Service's endpoint: pods reach it there through the Service. Its serving
// certificate is from a CA of its own (servingcert.go), for those
// addresses, the Service's cluster IP and names, so that a pod's in-cluster
// client config, which checks the certificate against the Service's
// address with the token volume's ca.crt, takes it.
func startClusterAPIServer(ctx context.Context, dataDir, etcdURL string, advertise net.IP, flags []string) (kubeapiservertesting.TestServer, error) {
	var result kubeapiservertesting.TestServer
	keyFile, err := ensureServiceAccountKey(filepath.Join(dataDir, serviceAccountKeyFile))
	if err != nil {
		return result, err
	}
	certDir := filepath.Join(dataDir, "apiserver")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return result, err
	}

	featureGate := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	effectiveVersion := compatibility.DefaultKubeEffectiveVersionForTest()
	registry := basecompatibility.NewComponentGlobalsRegistry()
	if err := registry.Register(basecompatibility.DefaultKubeComponent, effectiveVersion, featureGate); err != nil {
		return result, err
	}
	s := apiserveroptions.NewServerRunOptions()
	s.Options.GenericServerRunOptions.ComponentGlobalsRegistry = registry
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	addresses := []net.IP{net.IPv4(127, 0, 0, 1)}
	if advertise != nil {
		addresses = append(addresses, advertise)
		flags = append(flags, "--advertise-address="+advertise.String())
	}
	serviceIP, err := firstServiceIP(serviceClusterIPRange)
	if err != nil {
		return result, err
	}
	serving, err := ensureServingCert(certDir, append(append([]net.IP{}, addresses...), serviceIP))
	if err != nil {
		return result, fmt.Errorf("the apiserver's serving certificate: %w", err)
	}
	caPEM, err := os.ReadFile(serving.ca)
	if err != nil {
		return result, err
	}
	// The first listener, loopback, is the one the apiserver names as its
	// own address (its loopback client's and the kubeconfig's).
	listener, err := listenOnAddresses(addresses)
	if err != nil {
		return result, err
	}
	port := listener.Addr().(*net.TCPAddr).Port
	s.SecureServing.Listener = listener
	s.SecureServing.BindPort = port
	s.SecureServing.ServerCert.CertDirectory = certDir
	s.SecureServing.ExternalAddress = listener.Addr().(*net.TCPAddr).IP
	s.ServiceClusterIPRanges = serviceClusterIPRange
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}
	s.Etcd.StorageConfig = *storage
	kubeletClient, err := ensureKubeletClientCert(dataDir)
	if err != nil {
		return result, fmt.Errorf("kubelet client certificate: %w", err)
	}
	flags = append(flags,
		"--kubelet-client-certificate="+kubeletClient.cert,
		"--kubelet-client-key="+kubeletClient.key,
		"--service-account-issuer="+serviceAccountIssuer,
		"--service-account-key-file="+keyFile,
		"--service-account-signing-key-file="+keyFile,
		"--tls-cert-file="+serving.cert,
		"--tls-private-key-file="+serving.key,
	)
	if err := fs.Parse(flags); err != nil {
		listener.Close()
		return result, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	if err := registry.Set(); err != nil {
		listener.Close()
		return result, fmt.Errorf("kube-apiserver feature gates: %w", err)
	}

	// The server stops by TearDownFn, after the controllers that use it.
	serverCtx, stop := context.WithCancel(context.Background())
	fail := func(err error) (kubeapiservertesting.TestServer, error) {
		stop()
		listener.Close()
		return result, err
	}
	completed, err := s.Complete(serverCtx)
	if err != nil {
		return fail(fmt.Errorf("kube-apiserver options: %w", err))
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return fail(fmt.Errorf("kube-apiserver options: %w", errors.Join(errs...)))
	}
	config, err := app.NewConfig(completed)
	if err != nil {
		return fail(fmt.Errorf("kube-apiserver config: %w", err))
	}
	completedConfig, err := config.Complete()
	if err != nil {
		return fail(fmt.Errorf("kube-apiserver config: %w", err))
	}
	server, err := app.CreateServerChain(completedConfig)
	if err != nil {
		return fail(fmt.Errorf("kube-apiserver: %w", err))
	}
	done := make(chan error, 1)
	go func() {
		prepared, err := server.PrepareRun()
		if err != nil {
			done <- err
			return
		}
		done <- prepared.Run(serverCtx)
	}()

	// The admin client is the loopback client's token over the serving
	// certificate, checked against its CA: what the kubeconfig says.
	loopback := rest.CopyConfig(server.GenericAPIServer.LoopbackClientConfig)
	admin := &rest.Config{
		Host:            "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		BearerToken:     loopback.BearerToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
	}
	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return fail(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-done:
			return false, fmt.Errorf("kube-apiserver stopped: %v", err)
		default:
		}
		status := 0
		client.CoreV1().RESTClient().Get().AbsPath("/healthz").Do(ctx).StatusCode(&status)
		if status != 200 {
			return false, nil
		}
		_, err := client.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fail(fmt.Errorf("kube-apiserver not healthy: %w", err))
	}
	if err := bindKubeletClient(ctx, admin); err != nil {
		return fail(err)
	}
	result.ClientConfig = admin
	result.ClientConfig.QPS = 1000
	result.ClientConfig.Burst = 10000
	result.TearDownFn = func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}
	return result, nil
}

// ensureServiceAccountKey makes the account-token signing key at path
// (ECDSA P-256, readable by root alone) unless it is there: tokens made
// before a restart stay valid after it.
func ensureServiceAccountKey(path string) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return path, nil
}
