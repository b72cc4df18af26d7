package types

const (
	// BackupCredentialSecretName is the backup credential Secret the
	// manager may read as package/rbac.yaml deploys it; a Secret of
	// another name needs its own grant (docs/deploying.md, "Backup
	// credentials").
	BackupCredentialSecretName = "longhorn-backup-credential"
	// BackupCredentialsRole is package/rbac.yaml's Role that grants it.
	BackupCredentialsRole = "longhorn-backup-credentials"
)
