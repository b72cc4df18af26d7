package api

import (
	"net/http"
)

// VolumeBackupTargetInput is the body of updateBackupTargetName.
type VolumeBackupTargetInput struct {
	BackupTargetName string `json:"backupTargetName"`
}

// updateBackupTargetName is Longhorn's choice of a volume's backup target.
// There is one target here, made from the backup-target setting, and
// every volume backs up to it: choosing it (or none, meaning the default)
// is true already and answers the volume; choosing another is refused,
// naming the field.
func (s *Server) updateBackupTargetName(w http.ResponseWriter, r *http.Request, name string) error {
	var in VolumeBackupTargetInput
	if err := decodeBody(w, r, &in); err != nil {
		return err
	}
	if in.BackupTargetName != "" && in.BackupTargetName != defaultBackupTargetName {
		return notSupported("backupTargetName "+in.BackupTargetName,
			"there is one backup target, "+defaultBackupTargetName+", made from the backup-target setting, and every volume backs up to it")
	}
	return s.writeVolume(w, r, name)
}
