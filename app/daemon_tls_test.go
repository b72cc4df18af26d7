package app

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cadence-storage/longhorn-manager/mtls"
)

// The servers' Secret, which the instance manager pods mount to serve
// the node's replicas, is kept whenever they run as pods, whatever runs
// the backing image servers; the folder whenever a child process reads it.
func TestInternalTLSKeepsWhatTheInstanceManagersRead(t *testing.T) {
	for _, tc := range []struct {
		backing, im         string
		wantSecret, wantDir bool
	}{
		{BackingImageServerRunnerPod, InstanceManagerPod, true, false},
		{BackingImageServerRunnerProcess, InstanceManagerPod, true, true},
		{BackingImageServerRunnerPod, InstanceManagerProcess, true, true},
		{BackingImageServerRunnerProcess, InstanceManagerInProcess, false, true},
	} {
		t.Run(tc.backing+"/"+tc.im, func(t *testing.T) {
			kube := fake.NewClientset()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			dataDir := t.TempDir()
			o := DaemonOptions{Namespace: "longhorn-system", BackingImageServerRunner: tc.backing, InstanceManagerRunner: tc.im,
				Clock: clocktesting.NewFakeClock(time.Now())}
			tls, err := startInternalTLS(ctx, logrus.NewEntry(logrus.New()), kube, o, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = kube.CoreV1().Secrets(o.Namespace).Get(ctx, mtls.ServerSecretName, metav1.GetOptions{})
			if gotSecret := err == nil; gotSecret != tc.wantSecret {
				t.Errorf("Secret %s kept: %v, want %v", mtls.ServerSecretName, gotSecret, tc.wantSecret)
			}
			_, err = os.Stat(filepath.Join(dataDir, InternalTLSFolder, "tls.crt"))
			if gotDir := err == nil && tls.serverDir != ""; gotDir != tc.wantDir {
				t.Errorf("folder kept: %v (%q), want %v", gotDir, tls.serverDir, tc.wantDir)
			}
		})
	}
}
