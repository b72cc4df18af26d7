package api

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/sirupsen/logrus"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/manager"
)

// placementSpec sets what a volume create asks of its replicas'
// placement: the anti-affinity overrides and the tag selectors.
func placementSpec(spec *longhorn.VolumeSpec, in VolumeInput) error {
	for _, f := range []struct {
		field, value string
		to           *longhorn.SoftAntiAffinity
	}{
		{"replicaSoftAntiAffinity", in.ReplicaSoftAntiAffinity, &spec.ReplicaSoftAntiAffinity},
		{"replicaZoneSoftAntiAffinity", in.ReplicaZoneSoftAntiAffinity, &spec.ReplicaZoneSoftAntiAffinity},
		{"replicaDiskSoftAntiAffinity", in.ReplicaDiskSoftAntiAffinity, &spec.ReplicaDiskSoftAntiAffinity},
	} {
		a, err := manager.ParseSoftAntiAffinity(f.field, f.value)
		if err != nil {
			return err
		}
		*f.to = a
	}
	var err error
	if spec.DataLocality, err = manager.ParseDataLocality(in.DataLocality, spec.NumberOfReplicas); err != nil {
		return err
	}
	if spec.NodeSelector, err = manager.ParseSelector("nodeSelector", in.NodeSelector); err != nil {
		return err
	}
	spec.DiskSelector, err = manager.ParseSelector("diskSelector", in.DiskSelector)
	return err
}

// updateSoftAntiAffinity is Longhorn's updateReplicaSoftAntiAffinity,
// updateReplicaZoneSoftAntiAffinity and updateReplicaDiskSoftAntiAffinity:
// the body names the field after the action
// ({"replicaSoftAntiAffinity": "enabled"}).
func (s *Server) updateSoftAntiAffinity(w http.ResponseWriter, r *http.Request, name, action string) error {
	field := "r" + strings.TrimPrefix(action, "updateR")
	var in map[string]json.RawMessage
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	var value string
	if raw, ok := in[field]; ok {
		if err := json.Unmarshal(raw, &value); err != nil {
			return badRequest("%s: must be a string", field)
		}
	}
	v, err := s.vm.UpdateVolumeSoftAntiAffinity(r.Context(), name, field, value)
	if err != nil {
		return err
	}
	s.logger.WithFields(logrus.Fields{"volume": name, field: value}).Info("Volume's replica anti-affinity set")
	writeJSON(w, http.StatusOK, s.toVolume(baseURL(r), v))
	return nil
}
