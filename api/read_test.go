package api

import (
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

// TestAnObjectNotYetInTheCacheIsFound: an object created a moment ago may
// not be in the API's cache yet; a GET of it, and a system restore
// naming its system backup, ask the apiserver before saying it does not
// exist (Longhorn's python client reads a volume back right after making
// it; a system-backup job's run polls the system backup it has just
// made). Found by a run of the suite in which that poll was told 404.
func TestAnObjectNotYetInTheCacheIsFound(t *testing.T) {
	resources := []string{"volumes", "recurringjobs", "backuptargets", "backingimages", "systembackups", "systemrestores"}
	// The cache never hears of objects made after it synced: their
	// watches deliver nothing.
	s := newTestServerWith(t, func(lh *lhfake.Clientset) {
		for _, resource := range resources {
			lh.PrependWatchReactor(resource, func(k8stesting.Action) (bool, watch.Interface, error) {
				return true, watch.NewFake(), nil
			})
		}
	})
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: testNamespace} }
	objects := []runtime.Object{
		&longhorn.Volume{ObjectMeta: meta("vol"), Spec: longhorn.VolumeSpec{Size: 1 << 30, NumberOfReplicas: 1}},
		&longhorn.RecurringJob{ObjectMeta: meta("nightly"), Spec: longhorn.RecurringJobSpec{Task: longhorn.RecurringJobTypeSnapshot, Cron: "0 1 * * *", Retain: 1}},
		&longhorn.BackupTarget{ObjectMeta: meta("offsite"), Spec: longhorn.BackupTargetSpec{BackupTargetURL: "file:///offsite"}},
		&longhorn.BackingImage{ObjectMeta: meta("base")},
		&longhorn.SystemBackup{ObjectMeta: meta("nightly-20261127t010000z"), Status: longhorn.SystemBackupStatus{State: longhorn.SystemBackupStateGenerating}},
	}
	for _, obj := range objects {
		if err := s.lh.Tracker().Add(obj); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.server.ds.GetVolumeRO("vol"); !apierrors.IsNotFound(err) {
		t.Fatalf("the case needs objects the cache has not seen: %v", err)
	}
	for _, path := range []string{
		"/v1/volumes/vol", "/v1/volumeattachments/vol", "/v1/recurringjobs/nightly", "/v1/backuptargets/offsite", "/v1/backingimages/base",
		"/v1/systembackups/nightly-20261127t010000z",
	} {
		if code, _, raw := s.do(t, "GET", path, ""); code != http.StatusOK {
			t.Errorf("GET %s, not yet in the cache: %d %s", path, code, raw)
		}
		if code, _, raw := s.do(t, "GET", path+"-nowhere", ""); code != http.StatusNotFound {
			t.Errorf("GET %s-nowhere, which the apiserver does not have: %d %s", path, code, raw)
		}
	}
	if code, _, raw := s.do(t, "POST", "/v1/volumes/vol?action=recurringJobList", "{}"); code != http.StatusOK {
		t.Errorf("the jobs of a volume not yet in the cache: %d %s", code, raw)
	}
	if code, _, raw := s.do(t, "POST", "/v1/systemrestores", `{"name":"restore-1","systemBackup":"nightly-20261127t010000z"}`); code != http.StatusOK {
		t.Fatalf("a restore of a system backup not yet in the cache: %d %s", code, raw)
	}
	if code, _, raw := s.do(t, "GET", "/v1/systemrestores/restore-1", ""); code != http.StatusOK {
		t.Fatalf("GET of a system restore not yet in the cache: %d %s", code, raw)
	}
}
