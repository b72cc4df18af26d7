package kit

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	lhscheme "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned/scheme"
)

// eventScheme knows Kubernetes' and Longhorn's types, so the recorder can
// build object references to both. It is built once, when the package is
// loaded: a scheme's maps are not safe to write while another goroutine
// reads them, and several daemons may start at once in one process (tests).
// client-go's global scheme is left as it is.
var eventScheme = newEventScheme()

func newEventScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(lhscheme.AddToScheme(s))
	return s
}

// NewEventRecorder records Kubernetes Events about Longhorn objects in the
// manager's namespace, from the component longhorn-manager on this node.
// The broadcaster stops when ctx ends.
func NewEventRecorder(ctx context.Context, kubeClient kubernetes.Interface, namespace, nodeID string) record.EventRecorder {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kubeClient.CoreV1().Events(namespace)})
	go func() {
		<-ctx.Done()
		broadcaster.Shutdown()
	}()
	return broadcaster.NewRecorder(eventScheme, corev1.EventSource{Component: "longhorn-manager", Host: nodeID})
}
