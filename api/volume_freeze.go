package api

import (
	"net/http"

	"github.com/sirupsen/logrus"
)

// VolumeFreezeInput is the body of updateFreezeFilesystemForSnapshot.
type VolumeFreezeInput struct {
	FreezeFilesystemForSnapshot string `json:"freezeFilesystemForSnapshot"`
}

// updateFreezeFilesystemForSnapshot is Longhorn's choice of whether a
// volume's snapshots freeze its mounted filesystem: ignored (the
// freeze-filesystem-for-snapshot setting decides), enabled or disabled.
func (s *Server) updateFreezeFilesystemForSnapshot(w http.ResponseWriter, r *http.Request, name string) error {
	var in VolumeFreezeInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	v, err := s.vm.UpdateVolumeFreezeFilesystemForSnapshot(r.Context(), name, in.FreezeFilesystemForSnapshot)
	if err != nil {
		return err
	}
	s.logger.WithFields(logrus.Fields{"volume": name, "freezeFilesystemForSnapshot": v.Spec.FreezeFilesystemForSnapshot}).Info("Volume's filesystem freeze for snapshots set")
	writeJSON(w, http.StatusOK, s.toVolume(baseURL(r), v))
	return nil
}
