package framework

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/mtls"
)

// ManagerCAFile writes the internal CA's certificates, as the managers of
// namespace ns publish them (the ConfigMap mtls.CAConfigMapName), to a
// file, as a pod mounts them, and returns its path.
func ManagerCAFile(t *testing.T, e *ManagerEnv) string {
	t.Helper()
	var data string
	Eventually(t, 30*time.Second, "the CA ConfigMap published", func() (bool, error) {
		cm, err := e.Kube.CoreV1().ConfigMaps(e.NS).Get(context.Background(), mtls.CAConfigMapName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		data = cm.Data[mtls.CAFile]
		return data != "", nil
	})
	path := filepath.Join(t.TempDir(), mtls.CAFile)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// UseAPITLS makes e call its daemon, started with --api-tls, over https,
// checking its certificate with the CA file, and returns the file's path.
func (e *APIEnv) UseAPITLS(t *testing.T) string {
	t.Helper()
	caFile := ManagerCAFile(t, e.ManagerEnv)
	e.Base = strings.Replace(e.Base, "http://", "https://", 1)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = mtls.APIClientConfig(caFile)
	e.HTTP = &http.Client{Transport: transport}
	return caFile
}
