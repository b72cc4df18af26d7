package api

import (
	"errors"
	"net/http"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	lhclient "github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/engineapi"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// trimFilesystem runs POST /v1/volumes/{name}?action=trimFilesystem, as
// Longhorn's: fstrim on the filesystem a pod mounts from the attached
// volume, on the volume's node, so the replicas give back the space of
// what the filesystem deleted. It answers the volume once fstrim is done;
// a volume that is detached, has no frontend, or is not mounted as a
// filesystem (a raw block volume, or one no pod mounts) is a 400 saying
// which.
func (s *Server) trimFilesystem(w http.ResponseWriter, r *http.Request, name string) error {
	v, err := s.ds.GetVolumeRO(name)
	if apierrors.IsNotFound(err) {
		return notFound("volume %q not found", name)
	}
	if err != nil {
		return err
	}
	if v.Spec.DisableFrontend || v.Status.FrontendDisabled {
		return &httpError{http.StatusBadRequest, lhclient.CodeNoMountedFilesystem, "volume " + name + " has its frontend disabled: no filesystem is mounted from it to trim"}
	}
	if v.Status.State != longhorn.VolumeStateAttached {
		return badRequest("volume %s is %s: trimFilesystem trims the filesystem mounted from an attached volume", name, v.Status.State)
	}
	engine, err := s.engineClient(name)
	if err != nil {
		return err
	}
	defer engine.Close()
	res, err := engine.FilesystemTrim(r.Context())
	if errors.Is(err, engineapi.ErrPrecondition) {
		return &httpError{http.StatusBadRequest, lhclient.CodeNoMountedFilesystem, err.Error()}
	}
	if err != nil {
		return engineError(err)
	}
	s.logger.WithFields(logrus.Fields{"volume": name, "mountPoint": res.MountPoint, "trimmedBytes": res.TrimmedBytes}).Info("Trimmed the volume's filesystem")
	writeJSON(w, http.StatusOK, s.toVolume(baseURL(r), v))
	return nil
}
