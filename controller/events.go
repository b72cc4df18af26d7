package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	lhscheme "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/scheme"
)

// NewEventRecorder records Kubernetes Events about Longhorn objects in the
// manager's namespace, from the component longhorn-manager on this node.
// The broadcaster stops when ctx ends.
func NewEventRecorder(ctx context.Context, kubeClient kubernetes.Interface, namespace, nodeID string) record.EventRecorder {
	// Longhorn's types must be in the scheme the recorder uses to build
	// object references.
	_ = lhscheme.AddToScheme(scheme.Scheme)
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kubeClient.CoreV1().Events(namespace)})
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "longhorn-manager", Host: nodeID})
}
