//go:build e2e

package api

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/app"
	bipb "github.com/cadence-storage/longhorn-manager/backingimage/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/datastore"
	enginepb "github.com/cadence-storage/longhorn-manager/engine/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/mtls"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// answeredOverGRPC calls a gRPC service at addr as id and expects an
// answer.
func answeredOverGRPC(t *testing.T, service, addr string, id *mtls.Identity, call func(ctx context.Context, conn *grpc.ClientConn) error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, id.GRPCDialOption())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := call(ctx, conn); err != nil {
		t.Fatalf("%s at %s refused a Longhorn component: %v", service, addr, err)
	}
}

// refusedOverHTTPS gets a data source's state at addr with each hostile
// transport and expects every request refused.
func refusedOverHTTPS(t *testing.T, addr string) {
	t.Helper()
	for name, cfg := range framework.HostileTransports(t) {
		scheme := "https://"
		if cfg == nil {
			scheme = "http://"
		}
		client := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
		resp, err := client.Get(scheme + addr + "/v1/file")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("the data source at %s answered a client with %s", addr, name)
			}
		}
	}
}

// waitServerAddress waits for a backing image server's address.
func waitServerAddress(t *testing.T, what string, get func() (string, error)) string {
	t.Helper()
	var addr string
	framework.Eventually(t, 60*time.Second, what+" has an address", func() (bool, error) {
		var err error
		addr, err = get()
		return addr != "", err
	})
	return addr
}

// TestInternalCallsNeedACertificateOfTheClustersCA plays a pod on the
// network: the engine service, a backing image manager and a data source
// each refuse a plain client, a TLS client without a certificate and one
// with a certificate of its own CA, and answer a Longhorn component.
func TestInternalCallsNeedACertificateOfTheClustersCA(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t, framework.WithTestServers)
	id := framework.ClusterIdentity(t, e.Kube, e.NS)

	e.Call(t, "POST", "/v1/volumes", `{"name":"tls","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
	e.AttachVolume(t, "tls")
	eng, err := e.LH.LonghornV1beta2().Engines(e.NS).Get(context.Background(), datastore.EngineName("tls"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	engineAddr := net.JoinHostPort(eng.Status.IP, strconv.Itoa(eng.Status.Port))
	volumeGet := func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := enginepb.NewEngineClient(conn).VolumeGet(ctx, &enginepb.VolumeRequest{Volume: "tls"})
		return err
	}
	framework.RefusedOverGRPC(t, "the engine service", engineAddr, volumeGet)
	answeredOverGRPC(t, "the engine service", engineAddr, id, volumeGet)

	// An upload image: its data source, waiting for the upload, and then
	// the disk's manager run as child processes of the daemon.
	e.Call(t, "POST", "/v1/backingimages", `{"name":"tls","sourceType":"upload"}`).Expect(t, 200)
	dsAddr := waitServerAddress(t, "the data source", func() (string, error) {
		ds, err := e.LH.LonghornV1beta2().BackingImageDataSources(e.NS).Get(context.Background(), "tls", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		return ds.Status.IP, nil
	})
	refusedOverHTTPS(t, dsAddr)
	resp, err := id.HTTPClient().Get("https://" + dsAddr + "/v1/file")
	if err != nil {
		t.Fatalf("the data source refused a Longhorn component: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the data source answered a Longhorn component %d", resp.StatusCode)
	}
	// The API streams the upload to the data source over mutual TLS.
	content := bytes.Repeat([]byte("longhorn"), 128<<10)
	body, ct := framework.MultipartUpload(t, content)
	e.Call(t, "POST", "/v1/backingimages/tls?action=upload&size="+strconv.Itoa(len(content)), string(body), "Content-Type", ct).Expect(t, 200)
	bimAddr := waitServerAddress(t, "the backing image manager", func() (string, error) {
		bims, err := e.LH.LonghornV1beta2().BackingImageManagers(e.NS).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(bims.Items) == 0 {
			return "", err
		}
		return bims.Items[0].Status.IP, nil
	})
	list := func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := bipb.NewBackingImageManagerClient(conn).List(ctx, &bipb.Empty{})
		return err
	}
	framework.RefusedOverGRPC(t, "the backing image manager", bimAddr, list)
	answeredOverGRPC(t, "the backing image manager", bimAddr, id, list)

	// A data source's leaf, of its narrow role (a data source fetches
	// untrusted URLs): the engine answers it what an export reads, and
	// nothing that changes a volume; the backing image managers and the
	// data sources answer it nothing.
	ds := framework.ClusterIdentityOf(t, e.Kube, e.NS, mtls.RoleDataSource)
	answeredOverGRPC(t, "the engine service", engineAddr, ds, volumeGet)
	deniedOverGRPC(t, "the engine service", engineAddr, ds, func(ctx context.Context, conn *grpc.ClientConn) error {
		_, err := enginepb.NewEngineClient(conn).SnapshotCreate(ctx, &enginepb.SnapshotCreateRequest{Volume: "tls", Name: "by-a-data-source"})
		return err
	})
	deniedOverGRPC(t, "the backing image manager", bimAddr, ds, list)
	if resp, err := ds.HTTPClient().Get("https://" + dsAddr + "/v1/file"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("a data source answered another data source's leaf %d, want 403", resp.StatusCode)
		}
	}
}

// deniedOverGRPC calls a gRPC service at addr as id and expects
// PermissionDenied.
func deniedOverGRPC(t *testing.T, service, addr string, id *mtls.Identity, call func(ctx context.Context, conn *grpc.ClientConn) error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, id.GRPCDialOption())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := call(ctx, conn); status.Code(err) != codes.PermissionDenied {
		t.Errorf("%s at %s answered a data source's leaf: %v, want PermissionDenied", service, addr, err)
	}
}

// TestInternalCAIsMadeOnceAndKeptAcrossRestarts: the first start makes
// the CA Secret (managed-by label, no key in any other Secret) and the
// child servers' folder; a restart reads them and writes neither.
func TestInternalCAIsMadeOnceAndKeptAcrossRestarts(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	framework.InstallRBAC(t, kube, ns)
	dataDir := t.TempDir()
	d := framework.StartDaemon(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", dataDir)
	ca, err := kube.CoreV1().Secrets(ns).Get(context.Background(), mtls.CASecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no CA after the first start: %v", err)
	}
	if ca.Labels[types.LabelManagedBy] != types.ManagedByValue {
		t.Errorf("CA Secret labels %v", ca.Labels)
	}
	folder := filepath.Join(dataDir, app.InternalTLSFolder)
	leaf, err := os.ReadFile(filepath.Join(folder, mtls.CertFile))
	if err != nil {
		t.Fatalf("no leaf for the child servers: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(folder, mtls.KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the servers' key: %v, %v", fi.Mode(), err)
	}
	d.Stop(t)

	framework.StartDaemon(t, cluster.ServiceAccountConfig(ns, framework.ServiceAccount), ns, "node-1", dataDir)
	again, err := kube.CoreV1().Secrets(ns).Get(context.Background(), mtls.CASecretName, metav1.GetOptions{})
	if err != nil || again.ResourceVersion != ca.ResourceVersion {
		t.Errorf("a restart rewrote the CA: %v", err)
	}
	if now, _ := os.ReadFile(filepath.Join(folder, mtls.CertFile)); string(now) != string(leaf) {
		t.Error("a restart rewrote the servers' leaf, still good")
	}
}
