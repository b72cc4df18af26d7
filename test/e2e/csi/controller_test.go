//go:build e2e

package csi

import (
	"context"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// csiController serves the driver's Controller service alone over the
// manager of e, as beside the sidecars, and returns a client of it.
func csiController(t *testing.T, e *framework.APIEnv) csipb.ControllerClient {
	t.Helper()
	sock, _ := framework.ServeCSI(t, e, csi.Options{Controller: true})
	return csipb.NewControllerClient(dialCSI(t, sock))
}

func mountCapability(fsType string) []*csipb.VolumeCapability {
	return []*csipb.VolumeCapability{{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: fsType}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}}
}

func createRequest(name string, size int64, params map[string]string) *csipb.CreateVolumeRequest {
	return &csipb.CreateVolumeRequest{Name: name, CapacityRange: &csipb.CapacityRange{RequiredBytes: size}, VolumeCapabilities: mountCapability(""), Parameters: params}
}

// TestCSICreateVolumeReadsTheStorageClass: the parameters Longhorn
// documents reach the volume, the old recurringJobs make their jobs once,
// and bad input gets the code the CSI spec names, a message naming the
// parameter, and leaves no Volume or RecurringJob behind.
func TestCSICreateVolumeReadsTheStorageClass(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	cs := csiController(t, e)
	ctx := context.Background()
	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"hourly","task":"snapshot","cron":"0 * * * *","retain":3,"concurrency":1,"groups":["gold"],"labels":{}}`).Expect(t, 200)
	// The driver lists the jobs through the API, which reads its cache:
	// wait until the job is there, as a StorageClass's would be.
	framework.Eventually(t, 10*time.Second, "the API lists the job", func() (bool, error) {
		return strings.Contains(e.Call(t, "GET", "/v1/recurringjobs", "").Raw, `"hourly"`), nil
	})

	// A selector: the volume carries the job and the group, not default.
	resp, err := cs.CreateVolume(ctx, createRequest("pvc-selected", 20<<20, map[string]string{
		"numberOfReplicas": "1", "staleReplicaTimeout": "30", "fsType": "xfs",
		"recurringJobSelector": `[{"name":"hourly","isGroup":false},{"name":"gold","isGroup":true}]`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.GetVolume(); got.GetVolumeId() != "pvc-selected" || got.GetCapacityBytes() != 300<<20 || got.GetVolumeContext()["fsType"] != "xfs" {
		t.Fatalf("the created volume: %+v (want 300 MiB, the least for xfs)", got)
	}
	v, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "pvc-selected", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Labels["recurring-job.longhorn.io/hourly"] != "enabled" || v.Labels["recurring-job-group.longhorn.io/gold"] != "enabled" || v.Labels["recurring-job-group.longhorn.io/default"] != "" {
		t.Fatalf("the volume's job labels: %v", v.Labels)
	}
	if v.Spec.NumberOfReplicas != 1 || v.Spec.StaleReplicaTimeout != 30 {
		t.Fatalf("the volume's spec: replicas %d, staleReplicaTimeout %d", v.Spec.NumberOfReplicas, v.Spec.StaleReplicaTimeout)
	}
	// The same request again answers the same volume; another size is
	// refused.
	if again, err := cs.CreateVolume(ctx, createRequest("pvc-selected", 20<<20, map[string]string{"fsType": "xfs"})); err != nil || again.GetVolume().GetCapacityBytes() != 300<<20 {
		t.Fatalf("a retried CreateVolume: %+v, %v", again, err)
	}
	wantCode(t, "a retry with another size", codes.AlreadyExists, "314572800 bytes", func() error {
		_, err := cs.CreateVolume(ctx, createRequest("pvc-selected", 400<<20, map[string]string{"fsType": "xfs"}))
		return err
	})

	// The old recurringJobs: two StorageClasses naming one job make one
	// RecurringJob.
	old := `[{"name":"snap","task":"snapshot","cron":"*/5 * * * *","retain":2,"labels":{"from":"sc"}}]`
	for _, name := range []string{"pvc-old-1", "pvc-old-2"} {
		if _, err := cs.CreateVolume(ctx, createRequest(name, 16<<20, map[string]string{"recurringJobs": old})); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	jobs, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, j := range jobs.Items {
		if j.Name != "hourly" {
			made = append(made, j.Name)
		}
	}
	if len(made) != 1 || !strings.HasPrefix(made[0], "snapshot-2-") {
		t.Fatalf("RecurringJobs made from recurringJobs: %v, want one snapshot-2-...", made)
	}
	for _, name := range []string{"pvc-old-1", "pvc-old-2"} {
		v, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, name, metav1.GetOptions{})
		if err != nil || v.Labels["recurring-job.longhorn.io/"+made[0]] != "enabled" || v.Labels["recurring-job-group.longhorn.io/default"] != "" {
			t.Fatalf("%s's labels: %v, %v", name, v.Labels, err)
		}
	}

	// Bad input: refused naming the parameter, nothing made.
	for _, c := range []struct {
		what   string
		size   int64
		params map[string]string
		code   codes.Code
		names  string
	}{
		{"a malformed recurringJobSelector", 16 << 20, map[string]string{"recurringJobSelector": `[{"name":"hourly"`}, codes.InvalidArgument, "recurringJobSelector"},
		{"a selector naming a missing job", 16 << 20, map[string]string{"recurringJobSelector": `[{"name":"nightly"}]`}, codes.InvalidArgument, `recurring job "nightly" does not exist`},
		{"an unknown job group", 16 << 20, map[string]string{"recurringJobSelector": `[{"name":"silver","isGroup":true}]`}, codes.InvalidArgument, `group "silver"`},
		{"malformed recurringJobs", 16 << 20, map[string]string{"recurringJobs": `[{"task":`}, codes.InvalidArgument, "recurringJobs"},
		{"an unknown fsType", 16 << 20, map[string]string{"fsType": "zfs"}, codes.InvalidArgument, "fsType"},
		{"an unknown parameter", 16 << 20, map[string]string{"replicaCount": "3"}, codes.InvalidArgument, "replicaCount"},
		{"a value it cannot honour", 16 << 20, map[string]string{"dataLocality": "best-effort"}, codes.InvalidArgument, "dataLocality"},
		{"more than any disk holds, with jobs to make", 1 << 50, map[string]string{"recurringJobs": `[{"name":"b","task":"backup","cron":"0 1 * * *","retain":7}]`}, codes.OutOfRange, "size"},
	} {
		wantCode(t, c.what, c.code, c.names, func() error {
			_, err := cs.CreateVolume(ctx, createRequest("pvc-bad", c.size, c.params))
			return err
		})
	}
	if _, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "pvc-bad", metav1.GetOptions{}); err == nil {
		t.Fatal("a refused CreateVolume left a Volume behind")
	}
	// The job made for the refused volume is deleted (its finalizer is
	// removed once its CronJob is gone).
	var names []string
	framework.Eventually(t, 30*time.Second, "the RecurringJobs left are hourly and "+made[0], func() (bool, error) {
		jobs, err := e.LH.LonghornV1beta2().RecurringJobs(e.NS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		names = names[:0]
		for _, j := range jobs.Items {
			names = append(names, j.Name)
		}
		return len(names) == 2, nil
	})

	// Deleting deletes the volume; deleting again is no error.
	for i := 0; i < 2; i++ {
		if _, err := cs.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{VolumeId: "pvc-old-2"}); err != nil {
			t.Fatalf("DeleteVolume %d: %v", i, err)
		}
	}
	framework.Eventually(t, 30*time.Second, "pvc-old-2 deleted", func() (bool, error) {
		_, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(ctx, "pvc-old-2", metav1.GetOptions{})
		return err != nil && strings.Contains(err.Error(), "not found"), nil
	})
}

// wantCode checks that call fails with code and a message holding names.
func wantCode(t *testing.T, what string, code codes.Code, names string, call func() error) {
	t.Helper()
	err := call()
	if st := status.Convert(err); err == nil || st.Code() != code || !strings.Contains(st.Message(), names) {
		t.Errorf("%s: %v, want %v naming %q", what, err, code, names)
	}
}
