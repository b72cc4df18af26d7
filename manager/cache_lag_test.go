package manager

// Requests that come right after a create, before the cache has the new
// object, must not be answered "not found".

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhfake "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/fake"
)

// TestUploadRightAfterCreateWaitsForTheCache: an upload that comes before
// the manager's cache has the image just created waits for it (here, the
// cache never fills: it times out saying why) instead of a 404; an image
// that does not exist is not found at once.
func TestUploadRightAfterCreateWaitsForTheCache(t *testing.T) {
	lh := lhfake.NewSimpleClientset(&longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "ns"},
		Spec: longhorn.BackingImageSpec{SourceType: longhorn.BackingImageDataSourceTypeUpload}})
	kube := kubefake.NewSimpleClientset()
	// Informers never started: the cache is empty, as just after a create.
	m := NewVolumeManager(datastore.New("ns", lh, kube, datastore.NewInformers(lh, kube, "ns", 0)))

	_, err := m.BackingImageUploadServer(context.Background(), "fresh", 300*time.Millisecond)
	if errors.Is(err, ErrNotFound) || !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "just created") {
		t.Fatalf("an image the cache does not have yet: %v, want unavailable, just created", err)
	}
	if _, err := m.BackingImageUploadServer(context.Background(), "missing", 300*time.Millisecond); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a missing image: %v, want not found", err)
	}
}

// TestSelectingAJobJustCreated: a volume may select a job the manager's
// cache does not have yet (created a moment ago); a job that does not
// exist is refused naming it.
func TestSelectingAJobJustCreated(t *testing.T) {
	lh := lhfake.NewSimpleClientset(&longhorn.RecurringJob{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Namespace: "ns"}})
	kube := kubefake.NewSimpleClientset()
	m := NewVolumeManager(datastore.New("ns", lh, kube, datastore.NewInformers(lh, kube, "ns", 0)))
	if err := m.checkSelectorItem(datastore.RecurringJobSelectorItem{Name: "fresh"}); err != nil {
		t.Fatalf("a job the cache does not have yet: %v", err)
	}
	err := m.checkSelectorItem(datastore.RecurringJobSelectorItem{Name: "missing"})
	if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), `recurring job "missing" does not exist`) {
		t.Fatalf("a missing job: %v", err)
	}
}
