package instancemanager

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	lhclientset "github.com/cadence-storage/longhorn-manager/k8s/pkg/client/clientset/versioned"
	"github.com/cadence-storage/longhorn-manager/types"
)

// Config is what the keeper knows of its node's manager.
type Config struct {
	// Namespace holds the InstanceManagers and their pods: the manager's.
	Namespace string
	// NodeID is the node whose instance manager this is: the manager's.
	NodeID string
	// Image is the image the manager wants its instance manager to run:
	// its own.
	Image string
	// DataDir is the node's data folder, the same path on the host and
	// in the pods.
	DataDir string
	// Placement, when set, gives the pod settings at its creation.
	Placement func() types.PodPlacement
	// OnPodCreated, when set, is called at each creation of a pod (the
	// manager's metrics count the instance manager's starts).
	OnPodCreated func()
}

// ErrPending marks an instance manager that is being made or replaced:
// ask again.
var ErrPending = errors.New("the node's instance manager is not running yet")

const (
	// apiTimeout bounds each call to the apiserver.
	apiTimeout = 10 * time.Second
	// reviveInterval spaces the keeper's looks at a pod that does not
	// answer (the instance manager's client asks twice a second).
	reviveInterval = 2 * time.Second
)

// Keeper keeps the node's instance manager of the manager's image: an
// InstanceManager object and its pod, made when there is none (the
// manager's pod is then started after its node's first), and found
// running when there is one. The node's instance managers of other images
// are the Set's: each is kept while it hosts engines or devices.
type Keeper struct {
	cfg  Config
	kube kubernetes.Interface
	lh   lhclientset.Interface
	log  *logrus.Entry

	mu sync.Mutex
	// current is the node's instance manager of cfg.Image, where new
	// engines start (once its pod runs).
	current *longhorn.InstanceManager
	// lastLook is when Revive last looked.
	lastLook time.Time
	// warnedStale is the pod (name/UID) last said to serve no replicas.
	warnedStale string
}

// NewKeeper returns the keeper of cfg.NodeID's instance manager.
func NewKeeper(log *logrus.Entry, kube kubernetes.Interface, lh lhclientset.Interface, cfg Config) *Keeper {
	return &Keeper{cfg: cfg, kube: kube, lh: lh, log: log.WithFields(logrus.Fields{"node": cfg.NodeID, "component": "instance-manager-keeper"})}
}

// Current is the node's instance manager of the manager's image, where new
// engines start, or nil before the first Ensure.
func (k *Keeper) Current() *longhorn.InstanceManager {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.current == nil {
		return nil
	}
	return k.current.DeepCopy()
}

// currentName is Current's name, "" before the first Ensure: what the
// engine starts and the change notices need, without a copy.
func (k *Keeper) currentName() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.current == nil {
		return ""
	}
	return k.current.Name
}

// Revive is the client's hook when its watch breaks: Ensure, at most every
// reviveInterval.
func (k *Keeper) Revive() error {
	k.mu.Lock()
	if time.Since(k.lastLook) < reviveInterval {
		k.mu.Unlock()
		return nil
	}
	k.lastLook = time.Now()
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*apiTimeout)
	defer cancel()
	_, err := k.Ensure(ctx)
	if errors.Is(err, ErrPending) {
		return nil
	}
	return err
}

// Ensure makes sure the node has its instance manager of cfg.Image and
// its pod, and returns it: made, or found; its pod made, or made again if
// it ended (ErrPending until its pod runs). Instance managers of other
// images are left alone: their folders are their own.
func (k *Keeper) Ensure(ctx context.Context) (*longhorn.InstanceManager, error) {
	mine, pods, err := k.list(ctx)
	if err != nil {
		return nil, err
	}
	want := Name(k.cfg.NodeID, k.cfg.Image)
	var im *longhorn.InstanceManager
	for _, o := range mine {
		if o.Name == want {
			im = o
		}
	}
	if pod := pods[want]; pod != nil && pod.DeletionTimestamp != nil {
		return nil, fmt.Errorf("%w: its pod %s is going away", ErrPending, pod.Name)
	}
	if im == nil {
		created, err := k.lh.LonghornV1beta2().InstanceManagers(k.cfg.Namespace).Create(ctx, newObject(k.cfg, k.cfg.Image), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = k.lh.LonghornV1beta2().InstanceManagers(k.cfg.Namespace).Get(ctx, want, metav1.GetOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("create instance manager %s of node %s: %w", want, k.cfg.NodeID, err)
		}
		k.log.WithFields(logrus.Fields{"instanceManager": want, "image": k.cfg.Image}).Info("Created the node's instance manager")
		im = created
	}
	k.setCurrent(im)
	if err := k.ensurePod(ctx, im, pods[im.Name]); err != nil {
		return nil, err
	}
	return im, nil
}

// Found is one of the node's instance managers of another image than the
// manager's, with its pod and the folder it serves in.
type Found struct {
	InstanceManager *longhorn.InstanceManager
	Pod             *corev1.Pod
	Dir             string
}

// Others are the node's instance managers of other images that have a pod:
// those may host engines and devices of the volumes attached before the
// manager's image changed (or came back). One without a pod runs nothing;
// the controller deletes it.
func (k *Keeper) Others(ctx context.Context) ([]Found, error) {
	mine, pods, err := k.list(ctx)
	if err != nil {
		return nil, err
	}
	want := Name(k.cfg.NodeID, k.cfg.Image)
	var out []Found
	for _, im := range mine {
		if pod := pods[im.Name]; im.Name != want && pod != nil {
			out = append(out, Found{InstanceManager: im, Pod: pod, Dir: DirOf(pod, k.cfg.DataDir)})
		}
	}
	return out, nil
}

// remove deletes an instance manager of another image and its pod: it
// hosts nothing.
func (k *Keeper) remove(ctx context.Context, im *longhorn.InstanceManager) error {
	err := k.lh.LonghornV1beta2().InstanceManagers(k.cfg.Namespace).Delete(ctx, im.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &im.UID}})
	if err == nil || apierrors.IsNotFound(err) {
		// The pod goes with its owner; it is deleted here too, for a
		// cluster without a garbage collector.
		err = k.kube.CoreV1().Pods(k.cfg.Namespace).Delete(ctx, im.Name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete instance manager %s of image %s: %w", im.Name, im.Spec.Image, err)
	}
	return nil
}

// ensurePod makes im's pod when it has none, and again when it ended
// (its engines ended with it).
func (k *Keeper) ensurePod(ctx context.Context, im *longhorn.InstanceManager, pod *corev1.Pod) error {
	pods := k.kube.CoreV1().Pods(k.cfg.Namespace)
	log := k.log.WithFields(logrus.Fields{"instanceManager": im.Name, "pod": im.Name, "image": im.Spec.Image})
	if pod != nil && (pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded) {
		_, why := podState(pod)
		if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the ended pod %s of instance manager %s: %w", pod.Name, im.Name, err)
		}
		log.WithField("reason", why).Warn("Deleted the instance manager's pod, which ended, to make it again")
		return fmt.Errorf("%w: its pod ended (%s) and is made again", ErrPending, why)
	}
	if pod != nil {
		if _, why := podState(pod); pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("%w: %s", ErrPending, why)
		}
		k.warnStale(log, pod)
		return nil
	}
	var placement types.PodPlacement
	if k.cfg.Placement != nil {
		placement = k.cfg.Placement()
	}
	if _, err := pods.Create(ctx, podFor(k.cfg, im, placement), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create pod %s of instance manager %s: %w", im.Name, im.Name, err)
	}
	log.Info("Created the instance manager's pod")
	if k.cfg.OnPodCreated != nil {
		k.cfg.OnPodCreated()
	}
	return fmt.Errorf("%w: its pod %s was created on node %s", ErrPending, im.Name, k.cfg.NodeID)
}

// warnStale says, once per pod, that the running pod of the manager's
// image was made before instance managers served replicas (the same image
// tag, rebuilt). It is not replaced for that: its engines would stop. Its
// spec is the one of its creation, as every running instance manager
// pod's is; a new image (a release) gets a pod of its own, and this one is
// made again only when it ends or is deleted.
func (k *Keeper) warnStale(log *logrus.Entry, pod *corev1.Pod) {
	if ServesReplicas(pod) {
		return
	}
	k.mu.Lock()
	key := pod.Name + "/" + string(pod.UID)
	said := k.warnedStale == key
	k.warnedStale = key
	k.mu.Unlock()
	if !said {
		log.Warn("The instance manager's pod was made before instance managers served replicas, and serves none to other nodes' engines: " +
			"it is kept, as its engines run on; delete it while it hosts no engine for one that does")
	}
}

// list returns the node's instance managers, oldest first, and their pods
// by name (missing when there is none).
func (k *Keeper) list(ctx context.Context) ([]*longhorn.InstanceManager, map[string]*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	all, err := k.lh.LonghornV1beta2().InstanceManagers(k.cfg.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("list instance managers: %w", err)
	}
	var mine []*longhorn.InstanceManager
	pods := map[string]*corev1.Pod{}
	for i := range all.Items {
		im := &all.Items[i]
		if im.Spec.NodeID != k.cfg.NodeID || im.DeletionTimestamp != nil {
			continue
		}
		mine = append(mine, im)
		pod, err := k.kube.CoreV1().Pods(k.cfg.Namespace).Get(ctx, im.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, nil, fmt.Errorf("get pod of instance manager %s: %w", im.Name, err)
		default:
			pods[im.Name] = pod
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].CreationTimestamp.Before(&mine[j].CreationTimestamp) })
	return mine, pods, nil
}

func (k *Keeper) setCurrent(im *longhorn.InstanceManager) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.current == nil || k.current.Name != im.Name {
		k.log.WithFields(logrus.Fields{"instanceManager": im.Name, "image": im.Spec.Image}).Info("The node's new engines start in this instance manager")
	}
	k.current = im.DeepCopy()
}
