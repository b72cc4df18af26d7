package api

import (
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gorilla/mux"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cadence-storage/longhorn-manager/datastore"
	"github.com/cadence-storage/longhorn-manager/internal/rights"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/manager"
)

// BackingImage is the API view of a BackingImage, in Longhorn's shape.
type BackingImage struct {
	Resource
	Name              string                                         `json:"name"`
	UUID              string                                         `json:"uuid"`
	SourceType        longhorn.BackingImageDataSourceType            `json:"sourceType"`
	Parameters        map[string]string                              `json:"parameters"`
	ExpectedChecksum  string                                         `json:"expectedChecksum"`
	CurrentChecksum   string                                         `json:"currentChecksum"`
	Size              int64                                          `json:"size"`
	DiskFileStatusMap map[string]longhorn.BackingImageDiskFileStatus `json:"diskFileStatusMap"`
	MinNumberOfCopies int                                            `json:"minNumberOfCopies"`
	DeletionTimestamp string                                         `json:"deletionTimestamp"`
	// Longhorn's fields its UI reads: the v1 engine, no selectors, no
	// secret, and the size as the virtual size (files are raw or become
	// raw here).
	DataEngine      string   `json:"dataEngine"`
	DiskSelector    []string `json:"diskSelector"`
	NodeSelector    []string `json:"nodeSelector"`
	VirtualSize     int64    `json:"virtualSize"`
	Secret          string   `json:"secret"`
	SecretNamespace string   `json:"secretNamespace"`
}

// BackingImageInput is the body of backing image create.
type BackingImageInput struct {
	Name              string            `json:"name"`
	SourceType        string            `json:"sourceType"`
	Parameters        map[string]string `json:"parameters"`
	ExpectedChecksum  string            `json:"expectedChecksum"`
	MinNumberOfCopies int               `json:"minNumberOfCopies"`
	// Disks are the UUIDs of the disks that get a file at once; the owner
	// node's first disk when empty. Replicas add theirs as they need it.
	Disks []string `json:"disks"`
}

// BackingImageCleanupInput is the body of backingImageCleanup: the disks
// (UUIDs) whose files go now.
type BackingImageCleanupInput struct {
	Disks []string `json:"disks"`
}

// backingImageActions are the actions of a backing image; upload only
// while an upload image waits for its file.
var backingImageActions = []string{"backingImageCleanup", "upload"}

func toBackingImage(base string, bi *longhorn.BackingImage) BackingImage {
	r := resource(base, "backingImage", "backingimages", bi.Name)
	r.Actions["backingImageCleanup"] = r.Links["self"] + "?action=backingImageCleanup"
	files := make(map[string]longhorn.BackingImageDiskFileStatus, len(bi.Status.DiskFileStatusMap))
	ready := false
	for disk, f := range bi.Status.DiskFileStatusMap {
		if f != nil {
			files[disk] = *f
			ready = ready || f.State == longhorn.BackingImageStateReady
		}
	}
	if bi.Spec.SourceType == longhorn.BackingImageDataSourceTypeUpload && !ready && bi.DeletionTimestamp == nil {
		r.Actions["upload"] = r.Links["self"] + "?action=upload"
	}
	params := bi.Spec.SourceParameters
	if params == nil {
		params = map[string]string{}
	}
	out := BackingImage{
		Resource: r, Name: bi.Name, UUID: bi.Status.UUID, SourceType: bi.Spec.SourceType, Parameters: params,
		ExpectedChecksum: bi.Spec.Checksum, CurrentChecksum: bi.Status.Checksum, Size: bi.Status.Size,
		DiskFileStatusMap: files, MinNumberOfCopies: max(bi.Spec.MinNumberOfCopies, 1),
		DataEngine: string(longhorn.DataEngineTypeV1), DiskSelector: []string{}, NodeSelector: []string{}, VirtualSize: bi.Status.Size,
	}
	if bi.DeletionTimestamp != nil {
		out.DeletionTimestamp = bi.DeletionTimestamp.UTC().Format(time.RFC3339)
	}
	return out
}

func (s *Server) backingImageCollection(base string, list []*longhorn.BackingImage) Collection {
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	data := make([]BackingImage, 0, len(list))
	for _, bi := range list {
		data = append(data, toBackingImage(base, bi))
	}
	return collection(base, "backingImage", "backingimages", data)
}

func (s *Server) listBackingImages(w http.ResponseWriter, r *http.Request) error {
	list, err := s.vm.ListBackingImages()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.backingImageCollection(baseURL(r), list))
	return nil
}

func (s *Server) getBackingImage(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	bi, err := datastore.CachedOrFresh(r.Context(), name, s.ds.GetBackingImageRO, s.ds.GetBackingImageFresh)
	if apierrors.IsNotFound(err) {
		return notFound("backing image %q not found", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toBackingImage(baseURL(r), bi))
	return nil
}

func (s *Server) createBackingImage(w http.ResponseWriter, r *http.Request) error {
	var in BackingImageInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	// An image exported from a volume copies that volume's data: the
	// caller must be allowed to read the volume.
	reads := rights.BackingImageReads(s.ds.Namespace(), longhorn.BackingImageDataSourceType(in.SourceType), in.Parameters)
	if err := s.requireAccess(r, fromRights(reads)...); err != nil {
		return err
	}
	bi, err := s.vm.CreateBackingImage(r.Context(), manager.BackingImageCreate{
		Name: in.Name, SourceType: longhorn.BackingImageDataSourceType(in.SourceType), Parameters: in.Parameters,
		ExpectedChecksum: in.ExpectedChecksum, Disks: in.Disks, MinNumberOfCopies: in.MinNumberOfCopies,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toBackingImage(baseURL(r), bi))
	return nil
}

func (s *Server) deleteBackingImage(w http.ResponseWriter, r *http.Request) error {
	if err := s.vm.DeleteBackingImage(r.Context(), mux.Vars(r)["name"]); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// backingImageAction runs POST /v1/backingimages/{name}?action=...
func (s *Server) backingImageAction(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	switch action := r.URL.Query().Get("action"); action {
	case "backingImageCleanup":
		var in BackingImageCleanupInput
		if err := decodeBody(w, r, &in); err != nil {
			return err
		}
		bi, err := s.vm.CleanupBackingImageDisks(r.Context(), name, in.Disks)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, toBackingImage(baseURL(r), bi))
		return nil
	case "upload":
		return s.uploadBackingImage(w, r, name)
	case "":
		return &httpError{http.StatusMethodNotAllowed, "MethodNotAllowed", "POST on a backing image needs ?action=..., one of " + strings.Join(backingImageActions, ", ")}
	default:
		return badRequest("action: %q is not a backing image action; use one of %s", action, strings.Join(backingImageActions, ", "))
	}
}
