package api

import (
	"net/http"

	"github.com/sirupsen/logrus"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
)

// ExpandInput is the body of the expand action, Longhorn's: the size to
// grow the volume to, in bytes or as a quantity such as 20Gi.
type ExpandInput struct {
	Size string `json:"size"`
}

// expandVolume runs POST /v1/volumes/{name}?action=expand: it raises the
// volume's spec.size (rounded up to a multiple of 2 MiB) and answers the
// volume. The engine grows the replicas while the volume is attached, or
// when it next attaches; the volume's controllers[0].actualSize says when
// the data plane has the new size.
func (s *Server) expandVolume(w http.ResponseWriter, r *http.Request, name string) error {
	var in ExpandInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	size, err := parseSize(in.Size)
	if err != nil {
		// Longhorn's UI sends a fraction of a unit ("0.05Gi"): a quantity
		// that is no whole number of bytes is rounded up, as Longhorn does.
		q, qerr := k8sresource.ParseQuantity(in.Size)
		if qerr != nil || q.Sign() <= 0 || q.Value() <= 0 {
			return err
		}
		size = q.Value()
	}
	v, err := s.vm.ExpandVolume(r.Context(), name, size)
	if err != nil {
		return err
	}
	s.logger.WithFields(logrus.Fields{"volume": name, "size": v.Spec.Size}).Info("Expanded volume: spec.size raised")
	writeJSON(w, http.StatusOK, s.toVolume(baseURL(r), v))
	return nil
}
