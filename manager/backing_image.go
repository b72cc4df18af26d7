package manager

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/datastore"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// ErrConflict marks a request that the current state of the objects
// refuses (an image in use, a name taken); the API answers 409.
var ErrConflict = errors.New("conflict")

// ErrUnavailable marks a request that cannot be served yet (a server not
// up); the API answers 503.
var ErrUnavailable = errors.New("unavailable")

func conflict(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConflict, fmt.Sprintf(format, args...))
}

// backingImageNameMaxLength keeps the folder <name>-<uuid> of the image's
// files within a file name's 255 bytes for any UUID (at most 64).
const backingImageNameMaxLength = 255 - 1 - 64

// maxSourceParameters is the CRD's bound on sourceParameters.
const maxSourceParameters = 16

// BackingImageCreate is what a new backing image is made from.
type BackingImageCreate struct {
	Name              string
	SourceType        longhorn.BackingImageDataSourceType
	Parameters        map[string]string
	ExpectedChecksum  string
	Disks             []string
	MinNumberOfCopies int
}

// sourceParameterKeys are the parameters each source type takes.
var sourceParameterKeys = map[longhorn.BackingImageDataSourceType][]string{
	longhorn.BackingImageDataSourceTypeDownload: {longhorn.DataSourceParameterURL},
	longhorn.BackingImageDataSourceTypeUpload:   {},
	longhorn.BackingImageDataSourceTypeExportFromVolume: {longhorn.DataSourceParameterVolumeName,
		longhorn.DataSourceParameterExportType, longhorn.DataSourceParameterSnapshotName},
}

// CreateBackingImage checks everything the CRD checks, and what it cannot
// (the disks and the volume exist, the name fits a folder), then creates
// the image. Its controller prepares the first file on the first disk
// (the owner node's first disk when none is given).
func (m *VolumeManager) CreateBackingImage(ctx context.Context, in BackingImageCreate) (*longhorn.BackingImage, error) {
	if err := m.validateBackingImage(in); err != nil {
		return nil, err
	}
	spec := longhorn.BackingImageSpec{SourceType: in.SourceType, Checksum: in.ExpectedChecksum, MinNumberOfCopies: max(in.MinNumberOfCopies, 1)}
	if len(in.Parameters) > 0 {
		spec.SourceParameters = in.Parameters
	}
	if len(in.Disks) > 0 {
		spec.Disks = map[string]string{}
		for _, d := range in.Disks {
			spec.Disks[d] = ""
		}
	}
	created, err := m.ds.CreateBackingImage(ctx, &longhorn.BackingImage{ObjectMeta: metav1.ObjectMeta{Name: in.Name}, Spec: spec})
	if apierrors.IsAlreadyExists(err) {
		return nil, conflict("name: backing image %q already exists", in.Name)
	}
	if apierrors.IsInvalid(err) {
		return nil, fmt.Errorf("%w: %v", ErrInvalidInput, err)
	}
	return created, err
}

func (m *VolumeManager) validateBackingImage(in BackingImageCreate) error {
	if in.Name == "" {
		return invalid("name: required")
	}
	if err := backingimage.ValidateName(in.Name); err != nil {
		return invalid("name: %q must be a lower-case DNS subdomain (a-z, 0-9, '-', '.', starting and ending with a letter or digit)", in.Name)
	}
	if len(in.Name) > backingImageNameMaxLength {
		return invalid("name: %q... (%d characters) is longer than %d characters (its files' folder <name>-<uuid> must fit a file name)", in.Name[:backingImageNameMaxLength], len(in.Name), backingImageNameMaxLength)
	}
	allowed, ok := sourceParameterKeys[in.SourceType]
	if !ok {
		if in.SourceType == "" {
			return invalid("sourceType: required, one of download, upload, export-from-volume")
		}
		return invalid("sourceType: %q must be one of download, upload, export-from-volume", in.SourceType)
	}
	if err := m.validateSourceParameters(in.SourceType, in.Parameters, allowed); err != nil {
		return err
	}
	if err := backingimage.ValidateChecksum(in.ExpectedChecksum); err != nil {
		return invalid("expectedChecksum: %q must be a SHA512 in lower-case hex (128 characters 0-9a-f)", in.ExpectedChecksum)
	}
	if in.MinNumberOfCopies < 0 {
		return invalid("minNumberOfCopies: must be at least 1 (0 or absent means 1), got %d", in.MinNumberOfCopies)
	}
	seen := map[string]bool{}
	for i, d := range in.Disks {
		switch {
		case d == "":
			return invalid("disks[%d]: empty disk UUID", i)
		case seen[d]:
			return invalid("disks[%d]: disk %s is listed twice", i, d)
		}
		seen[d] = true
		if _, err := m.ds.GetDiskByUUID(d); err != nil {
			return invalid("disks[%d]: %v", i, err)
		}
	}
	return nil
}

func (m *VolumeManager) validateSourceParameters(sourceType longhorn.BackingImageDataSourceType, params map[string]string, allowed []string) error {
	if len(params) > maxSourceParameters {
		return invalid("parameters: at most %d, got %d", maxSourceParameters, len(params))
	}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		if !known {
			if len(allowed) == 0 {
				return invalid("parameters.%s: sourceType %s takes no parameters", k, sourceType)
			}
			return invalid("parameters.%s: unknown for sourceType %s, which takes %s", k, sourceType, strings.Join(allowed, ", "))
		}
	}
	switch sourceType {
	case longhorn.BackingImageDataSourceTypeDownload:
		raw := params[longhorn.DataSourceParameterURL]
		if raw == "" {
			return invalid("parameters.url: required for sourceType download")
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return invalid("parameters.url: %q must be an http or https URL with a host", raw)
		}
	case longhorn.BackingImageDataSourceTypeExportFromVolume:
		vol := params[longhorn.DataSourceParameterVolumeName]
		if vol == "" {
			return invalid("parameters.volume-name: required for sourceType export-from-volume")
		}
		if _, err := m.ds.GetVolumeRO(vol); apierrors.IsNotFound(err) {
			return invalid("parameters.volume-name: volume %q does not exist", vol)
		} else if err != nil {
			return err
		}
		switch t := params[longhorn.DataSourceParameterExportType]; t {
		case "", longhorn.ExportTypeRaw, longhorn.ExportTypeQCOW2:
		default:
			return invalid("parameters.export-type: %q must be raw or qcow2", t)
		}
	}
	return nil
}

// ListBackingImages lists the backing images, by name.
func (m *VolumeManager) ListBackingImages() ([]*longhorn.BackingImage, error) {
	list, err := m.ds.ListBackingImagesRO()
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list, err
}

// GetBackingImage returns the cached backing image.
func (m *VolumeManager) GetBackingImage(name string) (*longhorn.BackingImage, error) {
	bi, err := m.ds.GetBackingImageRO(name)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: backing image %q", ErrNotFound, name)
	}
	return bi, err
}

// backingImageUsers names the volumes that use the image and their
// replicas, in a sentence; empty when none does.
func (m *VolumeManager) backingImageUsers(name string) (string, error) {
	replicas, err := m.ds.ListBackingImageReplicasRO(name)
	if err != nil {
		return "", err
	}
	byVolume := map[string][]string{}
	for _, r := range replicas {
		byVolume[r.Spec.VolumeName] = append(byVolume[r.Spec.VolumeName], r.Name)
	}
	volumes, err := m.ds.ListVolumesRO(labels.Everything())
	if err != nil {
		return "", err
	}
	for _, v := range volumes {
		if _, ok := byVolume[v.Name]; !ok && v.Spec.BackingImage == name {
			byVolume[v.Name] = nil
		}
	}
	if len(byVolume) == 0 {
		return "", nil
	}
	names := make([]string, 0, len(byVolume))
	for v := range byVolume {
		names = append(names, v)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, v := range names {
		rs := byVolume[v]
		sort.Strings(rs)
		switch {
		case v == "":
			parts = append(parts, "replicas "+strings.Join(rs, ", "))
		case len(rs) == 0:
			parts = append(parts, "volume "+v)
		default:
			parts = append(parts, fmt.Sprintf("volume %s (replicas %s)", v, strings.Join(rs, ", ")))
		}
	}
	return strings.Join(parts, "; "), nil
}

// DeleteBackingImage deletes an image no volume uses; the controller then
// removes its files and data source. It is refused, naming the volumes
// and replicas, while any uses it.
func (m *VolumeManager) DeleteBackingImage(ctx context.Context, name string) error {
	bi, err := m.GetBackingImage(name)
	if err != nil {
		return err
	}
	if bi.DeletionTimestamp != nil {
		return nil
	}
	users, err := m.backingImageUsers(name)
	if err != nil {
		return err
	}
	if users != "" {
		return conflict("backing image %s is used by %s: delete those volumes first", name, users)
	}
	err = m.ds.DeleteBackingImage(ctx, name)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: backing image %q", ErrNotFound, name)
	}
	return err
}

// CleanupBackingImageDisks removes disks from the image's spec.disks now,
// so their managers delete the files, unless decideBackingImageCleanup
// refuses it.
func (m *VolumeManager) CleanupBackingImageDisks(ctx context.Context, name string, disks []string) (*longhorn.BackingImage, error) {
	var result *longhorn.BackingImage
	err := datastore.RetryOnConflict(func() error {
		bi, err := m.ds.GetBackingImageFresh(ctx, name)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: backing image %q", ErrNotFound, name)
		}
		if err != nil {
			return err
		}
		if bi.DeletionTimestamp != nil {
			return conflict("backing image %s is being deleted", name)
		}
		decision := backingImageCleanup{Disks: bi.Spec.Disks, MinCopies: bi.Spec.MinNumberOfCopies, Files: bi.Status.DiskFileStatusMap,
			InUse: map[string][]string{}, Requested: disks}
		replicas, err := m.ds.ListBackingImageReplicasRO(name)
		if err != nil {
			return err
		}
		for _, r := range replicas {
			decision.InUse[r.Spec.DiskID] = append(decision.InUse[r.Spec.DiskID], r.Name)
		}
		if bids, err := m.ds.GetBackingImageDataSourceRO(name); err == nil && bids.Spec.UUID == bi.Status.UUID &&
			!bids.Spec.FileTransferred && bids.Status.CurrentState != longhorn.BackingImageStateFailed {
			decision.PreparingDisk = bids.Spec.DiskUUID
		}
		keep, refusal := decideBackingImageCleanup(decision)
		if refusal != nil {
			if refusal.unknown {
				return invalid("%s", refusal.message)
			}
			return conflict("%s", refusal.message)
		}
		bi.Spec.Disks = keep
		result, err = m.ds.UpdateBackingImage(ctx, bi)
		return err
	})
	if err != nil {
		return nil, err
	}
	logrus.WithFields(logrus.Fields{"backingImage": name, "disks": disks}).Info("Removed disks from the backing image on request: their files go")
	return result, nil
}
