// Package manager holds the business operations the API offers, on top of
// the datastore: VolumeManager for volumes and their recurring jobs.
package manager

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/types"
)

// ErrInvalidInput marks errors caused by what the caller sent; the API
// answers them with 400 and the message, which names the field.
var ErrInvalidInput = errors.New("invalid input")

// ErrNotFound marks errors about something the caller named that does not
// exist; the API answers them with 404.
var ErrNotFound = errors.New("not found")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

// volumeNamePattern is Longhorn's rule for volume names.
var volumeNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]+$`)

// volumeNameMaxLength keeps names of engines and replicas derived from the
// volume within Kubernetes' limits.
const volumeNameMaxLength = 63

// VolumeManager creates volumes and manages the recurring jobs and groups
// they select.
type VolumeManager struct {
	ds *datastore.DataStore
}

// NewVolumeManager returns a VolumeManager on the datastore.
func NewVolumeManager(ds *datastore.DataStore) *VolumeManager {
	return &VolumeManager{ds: ds}
}

// CreateVolume creates a volume that runs the jobs and groups of selector.
// A volume whose selector is empty joins the default group.
// selectedNode, when set, is the node whose disks take the replicas
// (types.AnnotationSelectedNode); it must be a Longhorn node.
func (m *VolumeManager) CreateVolume(ctx context.Context, name string, spec longhorn.VolumeSpec, selector []datastore.RecurringJobSelectorItem, selectedNode string) (*longhorn.Volume, error) {
	switch {
	case name == "":
		return nil, invalid("name: required")
	case len(name) > volumeNameMaxLength:
		return nil, invalid("name: %q... (%d characters) is longer than %d characters", name[:volumeNameMaxLength], len(name), volumeNameMaxLength)
	case !volumeNamePattern.MatchString(name):
		return nil, invalid("name: %q must be lowercase letters, digits, '-', '_' or '.', starting with a letter or digit", name)
	}
	for i, item := range selector {
		if err := m.checkSelectorItem(item); err != nil {
			return nil, fmt.Errorf("recurringJobSelector[%d]: %w", i, err)
		}
	}
	if err := m.checkBackingImageSize(spec); err != nil {
		return nil, err
	}
	if err := m.checkDataSource(ctx, spec); err != nil {
		return nil, err
	}
	if err := m.checkCapacity(spec); err != nil {
		return nil, err
	}
	v := &longhorn.Volume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: datastore.SelectorLabels(selector)},
		Spec:       spec,
	}
	if selectedNode != "" {
		if _, err := m.ds.GetNodeRO(selectedNode); apierrors.IsNotFound(err) {
			return nil, invalid("selectedNode: %q is not a Longhorn node", selectedNode)
		} else if err != nil {
			return nil, err
		}
		v.Annotations = map[string]string{types.AnnotationSelectedNode: selectedNode}
	}
	created, err := m.ds.CreateVolume(ctx, v)
	if apierrors.IsAlreadyExists(err) {
		return nil, invalid("name: volume %q already exists", name)
	}
	if apierrors.IsInvalid(err) {
		return nil, fmt.Errorf("%w: %v", ErrInvalidInput, err)
	}
	return created, err
}

// checkBackingImageSize refuses a volume smaller than the disk its
// backing image holds, once a ready file has told that size. An image
// that does not exist yet, or whose size is not known yet, is not
// refused here: the volume waits for it (WaitForBackingImage), and the
// volume controller checks the size again.
func (m *VolumeManager) checkBackingImageSize(spec longhorn.VolumeSpec) error {
	if spec.BackingImage == "" {
		return nil
	}
	bi, err := m.ds.GetBackingImageRO(spec.BackingImage)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if why := datastore.VolumeTooSmallForImage(spec.Size, bi); why != "" {
		return invalid("size: %s", why)
	}
	return nil
}

// checkSelectorItem refuses an item whose name cannot be a label, and a
// job that does not exist. A group may be selected before any job lists it.
func (m *VolumeManager) checkSelectorItem(item datastore.RecurringJobSelectorItem) error {
	if err := datastore.ValidateSelectorItemName(item); err != nil {
		return fmt.Errorf("%w: name: %v", ErrInvalidInput, err)
	}
	if item.IsGroup {
		return nil
	}
	_, err := m.ds.GetRecurringJobRO(item.Name)
	if apierrors.IsNotFound(err) {
		// A job created a moment ago may not be in the cache yet: only
		// the API says it does not exist.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = m.ds.GetRecurringJobFresh(ctx, item.Name)
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: name: recurring job %q does not exist", ErrInvalidInput, item.Name)
	}
	return err
}

// ListVolumeRecurringJobs lists the jobs and groups a volume selects.
func (m *VolumeManager) ListVolumeRecurringJobs(ctx context.Context, name string) ([]datastore.RecurringJobSelectorItem, error) {
	v, err := datastore.CachedOrFresh(ctx, name, m.ds.GetVolumeRO, m.ds.GetVolumeFresh)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: volume %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, err
	}
	return datastore.RecurringJobSelector(v.Labels), nil
}

// AddVolumeRecurringJob makes the volume select a job or a group, and
// returns what it selects afterwards.
func (m *VolumeManager) AddVolumeRecurringJob(ctx context.Context, name string, item datastore.RecurringJobSelectorItem) ([]datastore.RecurringJobSelectorItem, error) {
	if err := m.checkSelectorItem(item); err != nil {
		return nil, err
	}
	return m.updateSelection(ctx, name, func(labels map[string]string) bool {
		if labels[item.LabelKey()] == types.LabelValueEnabled {
			return false
		}
		labels[item.LabelKey()] = types.LabelValueEnabled
		return true
	})
}

// DeleteVolumeRecurringJob makes the volume stop selecting a job or a
// group, and returns what it selects afterwards.
func (m *VolumeManager) DeleteVolumeRecurringJob(ctx context.Context, name string, item datastore.RecurringJobSelectorItem) ([]datastore.RecurringJobSelectorItem, error) {
	if err := datastore.ValidateSelectorItemName(item); err != nil {
		return nil, fmt.Errorf("%w: name: %v", ErrInvalidInput, err)
	}
	return m.updateSelection(ctx, name, func(labels map[string]string) bool {
		if _, ok := labels[item.LabelKey()]; !ok {
			return false
		}
		delete(labels, item.LabelKey())
		return true
	})
}

func (m *VolumeManager) updateSelection(ctx context.Context, name string, change func(map[string]string) bool) ([]datastore.RecurringJobSelectorItem, error) {
	v, err := m.ds.UpdateVolumeLabels(ctx, name, change)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: volume %q", ErrNotFound, name)
	}
	if err != nil {
		return nil, err
	}
	return datastore.RecurringJobSelector(v.Labels), nil
}
