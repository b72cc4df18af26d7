package app

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setBackupTarget sets the backup-target setting through the API and
// waits until the API's cache holds it.
func (e *apiEnv) setBackupTarget(t *testing.T, target string) {
	t.Helper()
	e.call(t, "PUT", "/v1/settings/backup-target", `{"value":"`+target+`"}`).expect(t, 200)
	eventually(t, 10*time.Second, "backup target in the cache", func() (bool, error) {
		return strings.Contains(e.call(t, "GET", "/v1/settings/backup-target", "").raw, target), nil
	})
}

// completedBackupURL waits until the Backup object says Completed and
// answers its URL.
func (e *apiEnv) completedBackupURL(t *testing.T, backup string) string {
	t.Helper()
	var url string
	eventually(t, 30*time.Second, "backup "+backup+" Completed", func() (bool, error) {
		b, err := e.lh.LonghornV1beta2().Backups(e.ns).Get(context.Background(), backup, metav1.GetOptions{})
		if err == nil && b.Status.State == "Completed" {
			url = b.Status.URL
		}
		return url != "", nil
	})
	return url
}
