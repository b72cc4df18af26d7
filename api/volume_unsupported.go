package api

import (
	"fmt"
	"net/http"

	"github.com/sirupsen/logrus"
)

// unsupportedVolumeActions are the volume actions of Longhorn's API that
// this manager does not do, each with the reason. Longhorn's clients (its
// web UI, its python client) call them; they get a 422 that names the
// action and the reason rather than a "not a volume action", and the
// volume never offers them in its actions, which is how Longhorn's UI
// decides to hide or grey its menu items.
var unsupportedVolumeActions = map[string]string{
	"salvage":                               "the data plane keeps no failed replicas to salvage",
	"activate":                              "there are no disaster recovery (standby) volumes to activate",
	"cancelExpansion":                       "an expansion cannot be cancelled: the volume's spec.size is raised at once and its engine grows the replicas while it runs (or at its next start), with no pending expansion to undo",
	"updateReplicaCount":                    "a volume keeps the replica count it was created with (a failed replica is replaced and rebuilt while the volume is attached, but changing the count is not built yet)",
	"replicaRemove":                         "removing a replica by hand is not built yet (a failed one is replaced and rebuilt while the volume is attached)",
	"offlineReplicaRebuilding":              "replicas are rebuilt into the running engine of an attached volume only",
	"updateRebuildConcurrentSyncLimit":      "a rebuild copies four chunks at once, which no setting changes",
	"updateReplicaRebuildingBandwidthLimit": "only the v1 data engine exists here, and its rebuilds take no bandwidth limit",
	"updateUblkQueueDepth":                  "there is no ublk frontend (only the v1 data engine exists here)",
	"updateUblkNumberOfQueue":               "there is no ublk frontend (only the v1 data engine exists here)",
	"updateDataLocality":                    "a volume's dataLocality is chosen at its creation (disabled or strict-local); moving a replica to follow the engine is not built yet",
	"updateAccessMode":                      "volumes are ReadWriteOnce only; the project shares no volume",
	"updateReplicaAutoBalance":              "replicas are not moved once placed: balancing is not built yet",
	"updateSnapshotDataIntegrity":           "the engine does not hash snapshots to check their integrity",
	"updateSnapshotMaxCount":                "the engine does not limit the number of a volume's snapshots",
	"updateSnapshotMaxSize":                 "the engine does not limit the size of a volume's snapshots",
	"updateUnmapMarkSnapChainRemoved":       "a trim gives back the space of the head and of the snapshots already removed just below it, and never marks a snapshot removed: a trim does not delete snapshots a user kept",
	"updateBackupCompressionMethod":         "backups use the backup-compression-method setting, for every volume",
	"engineUpgrade":                         "the engine is built into the manager; there are no engine images to upgrade to",
	"pvCreate":                              "the manager creates no Kubernetes PersistentVolume for a volume",
	"pvcCreate":                             "the manager creates no Kubernetes PersistentVolumeClaim for a volume",
}

// refusedButOffered are the unsupported actions a volume lists all the
// same: Longhorn's UI shows their menu items whatever the volume offers
// (Trim Filesystem on an attached volume, Update Rebuild Concurrent Sync
// Limit on a v1 volume) and, without the action's link, does nothing when
// the user confirms. Listed, the click reaches the manager and the UI
// shows the manager's reason. Every other unsupported action is left out,
// which makes the UI hide or grey its item.
var refusedButOffered = []string{"updateRebuildConcurrentSyncLimit"}

// notSupported is Longhorn's error shape for what Longhorn does and this
// manager does not: 422, naming what was asked and why it cannot be done.
func notSupported(what, reason string) error {
	return &httpError{http.StatusUnprocessableEntity, "NotSupported", fmt.Sprintf("%s is not supported by this manager: %s", what, reason)}
}

// unsupportedVolumeAction is the answer to a Longhorn volume action this
// manager does not do; nil for an action Longhorn does not have either.
func (s *Server) unsupportedVolumeAction(volume, action string) error {
	reason, ok := unsupportedVolumeActions[action]
	if !ok {
		return nil
	}
	s.logger.WithFields(logrus.Fields{"volume": volume, "action": action, "reason": reason}).Info("Refused a Longhorn volume action this manager does not do")
	return notSupported("volume action "+action, reason)
}
