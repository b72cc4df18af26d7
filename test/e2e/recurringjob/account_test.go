//go:build e2e

package recurringjob

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

const recurringJobAccount = "longhorn-recurring-job"

// tokenKubeconfig is the cluster's kubeconfig with token as the only
// credential, as a pod of that account has.
func tokenKubeconfig(t *testing.T, cluster *testcluster.Cluster, token string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cluster.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name := range cfg.AuthInfos {
		cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRecurringJobPodsRunAsTheirOwnAccount: package/rbac.yaml's
// longhorn-recurring-job account is what the CronJob pods run as, it may
// run a job end to end against an API that checks RBAC and takes only
// tokens of its audience (as deployed: the pods get one projected), and
// it may not create pods, read Secrets, delete volumes or touch RBAC.
func TestRecurringJobPodsRunAsTheirOwnAccount(t *testing.T) {
	t.Parallel()
	e, _ := framework.KubernetesAuthAPIEnv(t, func(o *app.DaemonOptions) {
		o.ServiceAccount = framework.ServiceAccount
		o.CronJob.ServiceAccount = recurringJobAccount
		o.APITokenAudience = "longhorn-manager"
	})
	cluster, ns, kube := e.Cluster, e.NS, e.Kube
	ctx := context.Background()
	manager := []string{"Authorization", "Bearer " + framework.TokenOf(t, kube, ns, framework.ServiceAccount, "longhorn-manager")}

	e.Call(t, "POST", "/v1/recurringjobs", `{"name":"snap","task":"snapshot","cron":"@hourly","retain":2}`, manager...).Expect(t, 200)
	framework.Eventually(t, 10*time.Second, "job cached", func() (bool, error) {
		return e.Call(t, "GET", "/v1/recurringjobs/snap", "", manager...).Status == 200, nil
	})
	e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1,"recurringJobSelector":[{"name":"snap","isGroup":false}]}`, manager...).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "volume detached", func() (bool, error) {
		r := e.Call(t, "GET", "/v1/volumes/vol", "", manager...)
		return r.Status == 200 && r.Body["state"] == "detached", nil
	})
	e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`, manager...).Expect(t, 200)
	framework.Eventually(t, 30*time.Second, "volume attached", func() (bool, error) {
		r := e.Call(t, "GET", "/v1/volumes/vol", "", manager...)
		return r.Status == 200 && r.Body["state"] == "attached", nil
	})

	framework.Eventually(t, 30*time.Second, "the job's CronJob runs its pods as "+recurringJobAccount, func() (bool, error) {
		cj, err := kube.BatchV1().CronJobs(ns).Get(ctx, "snap", metav1.GetOptions{})
		return err == nil && cj.Spec.JobTemplate.Spec.Template.Spec.ServiceAccountName == recurringJobAccount &&
			len(cj.Spec.JobTemplate.Spec.Template.Spec.Volumes) == 1 &&
			cj.Spec.JobTemplate.Spec.Template.Spec.Volumes[0].Projected.Sources[0].ServiceAccountToken.Audience == "longhorn-manager", nil
	})
	// The projected token as the apiserver stores it causes no write, even
	// when every job is re-enqueued by a settings change.
	before := e.WaitCronJob(t, "snap", "CronJob", func(*batchv1.CronJob) bool { return true }).ResourceVersion
	e.SetSetting(t, types.SettingNameBackupTarget, "nfs://server:/backups")
	time.Sleep(2 * time.Second)
	if after := e.WaitCronJob(t, "snap", "CronJob", func(*batchv1.CronJob) bool { return true }).ResourceVersion; after != before {
		t.Errorf("an unchanged job with a projected token rewrote its CronJob (resourceVersion %s -> %s)", before, after)
	}

	// A run as the pods would make it: the account's default token for the
	// Kubernetes API, and its token of the API's audience, in the file the
	// CronJob projects it to, for the manager's API.
	apiToken := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(apiToken, []byte(framework.TokenOf(t, kube, ns, recurringJobAccount, "longhorn-manager")), 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.RunJob(t, tokenKubeconfig(t, cluster, framework.TokenOf(t, kube, ns, recurringJobAccount)), "snap", "2026-11-23T01:00:00Z", "--api-token-file", apiToken)
	if !strings.Contains(out, "succeeded=1 failed=0") {
		t.Fatalf("a run as %s: %s", recurringJobAccount, out)
	}
	job, err := e.LH.LonghornV1beta2().RecurringJobs(ns).Get(ctx, "snap", metav1.GetOptions{})
	if err != nil || !strings.Contains(job.Annotations["recurring-job.longhorn.io/last-run"], `"succeeded":1`) {
		t.Fatalf("the run's record on the job (written as %s): %v, %v", recurringJobAccount, job.Annotations, err)
	}
	list := e.Call(t, "POST", "/v1/volumes/vol?action=snapshotList", "", manager...).Expect(t, 200)
	if n := len(list.Body["data"].([]any)); n < 2 { // the job's snapshot and volume-head
		t.Fatalf("the run made no snapshot: %d entries", n)
	}

	user := "system:serviceaccount:" + ns + ":" + recurringJobAccount
	for _, attr := range []authorizationv1.ResourceAttributes{
		{Namespace: ns, Verb: "create", Resource: "pods"},
		{Namespace: ns, Verb: "get", Resource: "secrets"},
		{Namespace: ns, Verb: "delete", Group: "longhorn.io", Resource: "volumes"},
		// It changes no Volume itself, and may not ask the API for the
		// actions its tasks do not do.
		{Namespace: ns, Verb: "update", Group: "longhorn.io", Resource: "volumes", Name: "vol"},
		{Namespace: ns, Verb: "update", Group: "longhorn.io", Resource: "volumes", Subresource: "expand", Name: "vol"},
		{Namespace: ns, Verb: "update", Group: "longhorn.io", Resource: "volumes", Subresource: "snapshotRevert", Name: "vol"},
		{Namespace: ns, Verb: "update", Group: "longhorn.io", Resource: "backupvolumes", Name: "vol"},
		{Namespace: ns, Verb: "create", Group: "longhorn.io", Resource: "recurringjobs"},
		{Namespace: ns, Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "rolebindings"},
		{Namespace: ns, Verb: "create", Group: "batch", Resource: "jobs"},
	} {
		attr := attr
		sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &attr},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed {
			t.Errorf("%s may %s %s/%s.%s", recurringJobAccount, attr.Verb, attr.Resource, attr.Subresource, attr.Group)
		}
	}
	// What the API asks of the tasks it runs besides a snapshot's (which
	// the run above did): a backup, a backup's listing and deletion, the
	// backup-verify task's drill (and full drill), the filesystem-trim
	// task's trim, each action as its subresource.
	for _, attr := range []authorizationv1.ResourceAttributes{
		{Namespace: ns, Verb: "update", Group: "longhorn.io", Resource: "volumes", Subresource: "snapshotBackup", Name: "vol"},
		{Namespace: ns, Verb: "update", Group: "longhorn.io", Resource: "volumes", Subresource: "snapshotPurge", Name: "vol"},
		{Namespace: ns, Verb: "get", Group: "longhorn.io", Resource: "backupvolumes", Name: "vol"},
		// A backup's volume is found by listing its volume's (GET
		// /v1/backupvolumes?volumeName=...): found missing on the real node.
		{Namespace: ns, Verb: "list", Group: "longhorn.io", Resource: "backupvolumes"},
		{Namespace: ns, Verb: "update", Group: "longhorn.io", Resource: "backupvolumes", Subresource: "backupVerify", Name: "vol"},
		{Namespace: ns, Verb: "update", Group: "longhorn.io", Resource: "backupvolumes", Subresource: "backupVerifyFull", Name: "vol"},
		{Namespace: ns, Verb: "update", Group: "longhorn.io", Resource: "volumes", Subresource: "trimFilesystem", Name: "vol"},
		{Namespace: ns, Verb: "delete", Group: "longhorn.io", Resource: "backups"},
	} {
		sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &attr},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !sar.Status.Allowed {
			t.Errorf("%s may not %s %s/%s.%s, which its tasks ask of the API", recurringJobAccount, attr.Verb, attr.Resource, attr.Subresource, attr.Group)
		}
	}
}
