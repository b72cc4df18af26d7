//go:build e2e

package manager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/k8s/testcluster"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// The CSI driver's socket in every pod of package/: the driver's
// --endpoint and the sidecars' --csi-address, in a volume mounted at
// csiSocketDir in both.
const (
	csiSocketDir = "/csi"
	csiSocket    = csiSocketDir + "/csi.sock"
	// kubeletDir is the kubelet's --root-dir; the Node service's
	// registration tells the kubelet where its socket is on the host.
	kubeletDir = "/var/lib/kubelet"
	// healthPort is where each driver container serves /healthz for its
	// livenessProbe.
	healthPort = 9808
)

// TestPackageManifestsCSI: what package/ deploys for the CSI driver is
// accepted by the apiserver (a server-side dry run) and is what the driver
// and the sidecars need: the CSIDriver object as Longhorn's; the
// external-provisioner, external-attacher and csi-snapshotter (at the
// versions the end-to-end tests run) each beside `longhorn-manager csi
// --controller` on a socket in an emptyDir, with leader election; the
// VolumeSnapshotClasses longhorn-snapshot and longhorn-backup; the Node
// service in the manager's pods (where the volumes' NBD exports listen on
// 127.0.0.1), registering itself with the kubelet, with the kubelet's
// directory Bidirectional, the host's /dev and a host state directory;
// every driver container's livenessProbe on its own /healthz; the `longhorn`
// StorageClass; the NetworkPolicy letting the controller pods reach the
// API; and RBAC (applied for real, checked with SubjectAccessReviews) that
// lets each sidecar's account do what the sidecar and its driver do and
// not what they never do.
func TestPackageManifestsCSI(t *testing.T) {
	t.Parallel()
	cluster := testcluster.Get(t)
	ns := cluster.NewNamespace(t)
	kube := cluster.KubeClient(t)
	ctx := context.Background()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	versions := sidecarVersions(t)
	controllerPods := map[string]map[string]string{} // Deployment: its pods' labels
	kinds := map[string]int{}
	for _, obj := range framework.ReadManifests(t, "csi.yaml") {
		var err error
		switch o := obj.(type) {
		case *storagev1.CSIDriver:
			kinds["CSIDriver"]++
			checkCSIDriver(t, o)
			// Cluster-wide: a name of the test's own.
			o.Name = ns + "." + o.Name
			_, err = kube.StorageV1().CSIDrivers().Create(ctx, o, dry)
		case *appsv1.Deployment:
			kinds["Deployment"]++
			controllerPods[o.Name] = o.Spec.Template.Labels
			checkControllerDeployment(t, o, versions)
			o.Namespace = ns
			_, err = kube.AppsV1().Deployments(ns).Create(ctx, o, dry)
		case *storagev1.StorageClass:
			kinds["StorageClass"]++
			checkStorageClass(t, o)
			o.Name = ns + "-" + o.Name
			_, err = kube.StorageV1().StorageClasses().Create(ctx, o, dry)
		default:
			t.Errorf("csi.yaml holds an unexpected %T", obj)
		}
		if err != nil {
			t.Errorf("csi.yaml: %v", err)
		}
	}
	if kinds["CSIDriver"] != 1 || kinds["StorageClass"] != 1 || len(controllerPods) != 4 ||
		controllerPods["csi-provisioner"] == nil || controllerPods["csi-attacher"] == nil || controllerPods["csi-snapshotter"] == nil || controllerPods["csi-resizer"] == nil {
		t.Errorf("csi.yaml holds %v, Deployments %v: want a CSIDriver, the csi-provisioner, csi-attacher, csi-snapshotter and csi-resizer Deployments and a StorageClass", kinds, controllerPods)
	}
	checkSnapshotClasses(t, cluster.Config)

	for _, obj := range framework.ReadManifests(t, "longhorn-manager.yaml") {
		if ds, ok := obj.(*appsv1.DaemonSet); ok {
			checkNodePlugin(t, ds)
		}
	}

	// The controller pods call the API on 9500.
	for _, obj := range framework.ReadManifests(t, "networkpolicy.yaml") {
		p := obj.(*networkingv1.NetworkPolicy)
		if p.Name != "longhorn-manager" {
			continue
		}
		for name, podLabels := range controllerPods {
			if !policyAdmits(p, 9500, podLabels) {
				t.Errorf("NetworkPolicy longhorn-manager does not let the %s pods (%v) reach the API on 9500", name, podLabels)
			}
		}
	}

	framework.InstallRBAC(t, kube, ns)
	checkCSIRBAC(t, kube, ns)
}

// sidecarVersions are the sidecars' versions the end-to-end tests build
// (scripts/build-csi-sidecars.sh, when it is there) and so the image tags
// package/ must use: the sidecars' images are tagged with their release.
func sidecarVersions(t *testing.T) map[string]string {
	// The external-resizer's module is not served where the tests run: it
	// is not built, and its version is the one docs/csi.md names.
	versions := map[string]string{"csi-provisioner": "v6.4.0", "csi-attacher": "v4.13.0", "csi-snapshotter": "v8.7.0", "csi-resizer": "v2.3.0"}
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "scripts", "build-csi-sidecars.sh"))
	if err != nil {
		return versions
	}
	// build <binary> <module> <version> <cmd>
	for _, m := range regexp.MustCompile(`(?m)^build (csi-\S+) \S+ (v\S+) `).FindAllStringSubmatch(string(script), -1) {
		versions[m[1]] = m[2]
	}
	return versions
}

func checkCSIDriver(t *testing.T, d *storagev1.CSIDriver) {
	t.Helper()
	if d.Name != csi.DriverName {
		t.Errorf("the CSIDriver is %q, want %q", d.Name, csi.DriverName)
	}
	s := d.Spec
	if s.AttachRequired == nil || !*s.AttachRequired {
		t.Error("the CSIDriver does not require attach: no VolumeAttachment would reach ControllerPublishVolume")
	}
	if s.PodInfoOnMount == nil || !*s.PodInfoOnMount {
		t.Error("the CSIDriver has no podInfoOnMount, as Longhorn's has")
	}
	if !slices.Equal(s.VolumeLifecycleModes, []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}) {
		t.Errorf("the CSIDriver's volumeLifecycleModes are %v, want Persistent only", s.VolumeLifecycleModes)
	}
	if s.FSGroupPolicy == nil || *s.FSGroupPolicy != storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy {
		t.Errorf("the CSIDriver's fsGroupPolicy is %v: the driver applies no fsGroup, so the kubelet must (ReadWriteOnceWithFSType)", s.FSGroupPolicy)
	}
	if s.StorageCapacity == nil || !*s.StorageCapacity {
		t.Error("the CSIDriver does not ask for storage capacity, which the driver reports (GET_CAPACITY): the scheduler would not read the provisioner's CSIStorageCapacity objects")
	}
}

func checkControllerDeployment(t *testing.T, d *appsv1.Deployment, versions map[string]string) {
	t.Helper()
	spec := d.Spec.Template.Spec
	if want := "longhorn-" + d.Name; spec.ServiceAccountName != want {
		t.Errorf("%s runs as %q, want its own account %s", d.Name, spec.ServiceAccountName, want)
	}
	var sidecar, driver *corev1.Container
	for i := range spec.Containers {
		c := &spec.Containers[i]
		switch {
		case c.Name == d.Name:
			sidecar = c
		case strings.Contains(strings.Join(c.Command, " "), " csi "):
			driver = c
		}
	}
	if sidecar == nil || driver == nil {
		t.Fatalf("%s: no %s container beside the driver's", d.Name, d.Name)
	}
	if want := "registry.k8s.io/sig-storage/" + d.Name + ":" + versions[d.Name]; sidecar.Image != want {
		t.Errorf("%s runs %s, want %s (the version the end-to-end tests run)", d.Name, sidecar.Image, want)
	}
	args := expandArgs(sidecar.Args, sidecar.Env)
	want := []string{"--csi-address=" + csiSocket, "--leader-election", "--leader-election-namespace=$(POD_NAMESPACE)"}
	switch d.Name {
	case "csi-provisioner":
		// Storage capacity tracking, its objects owned by the Deployment
		// (pod, ReplicaSet, Deployment).
		want = append(want, "--default-fstype=ext4", "--extra-create-metadata=true", "--immediate-topology=false",
			"--enable-capacity", "--capacity-ownerref-level=2")
		if !hasFieldEnv(sidecar.Env, "NAMESPACE", "metadata.namespace") || !hasFieldEnv(sidecar.Env, "POD_NAME", "metadata.name") {
			t.Errorf("%s has no NAMESPACE and POD_NAME, which --enable-capacity needs for its objects' namespace and owner", d.Name)
		}
	case "csi-resizer":
		// The driver grows volumes in use: no pods to check.
		want = append(want, "--handle-volume-inuse-error=false")
	}
	for _, a := range want {
		if !slices.Contains(args, a) {
			t.Errorf("%s's args %v lack %s", d.Name, args, a)
		}
	}
	if !hasFieldEnv(sidecar.Env, "POD_NAMESPACE", "metadata.namespace") {
		t.Errorf("%s has no POD_NAMESPACE for its Lease's namespace", d.Name)
	}
	cmd := driver.Command
	if !slices.Contains(cmd, "--controller") || !slices.Contains(cmd, "--endpoint=unix://"+csiSocket) || slices.ContainsFunc(cmd, func(a string) bool { return strings.HasPrefix(a, "--node-id") }) {
		t.Errorf("%s's driver runs %v: want the Controller service alone on unix://%s", d.Name, cmd, csiSocket)
	}
	if sc := driver.SecurityContext; sc != nil && sc.Privileged != nil && *sc.Privileged {
		t.Errorf("%s's driver is privileged: it only calls the API", d.Name)
	}
	checkLiveness(t, d.Name, driver)
	for _, c := range []*corev1.Container{sidecar, driver} {
		m := mountAt(c, csiSocketDir)
		if m == nil {
			t.Errorf("%s: %s does not mount the socket's directory at %s", d.Name, c.Name, csiSocketDir)
			continue
		}
		if v := volumeNamed(&spec, m.Name); v == nil || v.EmptyDir == nil {
			t.Errorf("%s: the socket's volume %s is not an emptyDir of the pod", d.Name, m.Name)
		}
	}
}

func checkStorageClass(t *testing.T, sc *storagev1.StorageClass) {
	t.Helper()
	if sc.Name != "longhorn" || sc.Provisioner != csi.DriverName {
		t.Errorf("the StorageClass %s provisions with %q, want longhorn with %s", sc.Name, sc.Provisioner, csi.DriverName)
	}
	if sc.AllowVolumeExpansion == nil || !*sc.AllowVolumeExpansion {
		t.Error("the StorageClass does not allow expansion, which the driver does (EXPAND_VOLUME)")
	}
	if sc.ReclaimPolicy == nil || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("the StorageClass's reclaim policy is %v, want Delete", sc.ReclaimPolicy)
	}
	if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingImmediate {
		t.Errorf("the StorageClass's binding mode is %v, want Immediate (the driver declares no topology)", sc.VolumeBindingMode)
	}
	for _, p := range []string{"numberOfReplicas", "staleReplicaTimeout", "fsType"} {
		if sc.Parameters[p] == "" {
			t.Errorf("the StorageClass does not show %s", p)
		}
	}
	// csi/params_package_test.go checks the driver takes them.
}

// checkSnapshotClasses: package/components/snapshot-classes/csi-snapshot-classes.yaml holds
// Longhorn's two VolumeSnapshotClasses of the driver, deletionPolicy
// Delete, and the snapshot CRDs (those the end-to-end tests install,
// when scripts/build-csi-sidecars.sh has copied them) accept them.
func checkSnapshotClasses(t *testing.T, cfg *rest.Config) {
	t.Helper()
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "package", "components", "snapshot-classes", "csi-snapshot-classes.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"longhorn-snapshot": "snap", "longhorn-backup": "bak"}
	var classes []*unstructured.Unstructured
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("package/components/snapshot-classes/csi-snapshot-classes.yaml: %v", err)
		}
		name := obj.GetName()
		driver, _, _ := unstructured.NestedString(obj.Object, "driver")
		policy, _, _ := unstructured.NestedString(obj.Object, "deletionPolicy")
		kind, _, _ := unstructured.NestedString(obj.Object, "parameters", "type")
		if obj.GetKind() != "VolumeSnapshotClass" || driver != csi.DriverName || policy != "Delete" || want[name] != kind || kind == "" {
			t.Errorf("package/components/snapshot-classes/csi-snapshot-classes.yaml: %s %s of %q, deletionPolicy %q, type %q: want longhorn-snapshot (snap) and longhorn-backup (bak) of %s, Delete",
				obj.GetKind(), name, driver, policy, kind, csi.DriverName)
		}
		delete(want, name)
		classes = append(classes, obj)
	}
	if len(want) != 0 {
		t.Errorf("package/components/snapshot-classes/csi-snapshot-classes.yaml lacks %v", want)
	}
	crds := filepath.Join(root, "bin", "snapshot-crds")
	if _, err := os.Stat(filepath.Join(crds, "version")); err != nil {
		t.Logf("no %s (scripts/build-csi-sidecars.sh copies them): the classes are not checked against the CRDs", crds)
		return
	}
	framework.InstallSnapshotCRDs(t, cfg, crds)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range classes {
		if _, err := dyn.Resource(framework.VolumeSnapshotClasses).Create(context.Background(), c, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			t.Errorf("VolumeSnapshotClass %s: %v", c.GetName(), err)
		}
	}
}

// checkNodePlugin: the Node service in the manager's pods, registering
// itself with the kubelet; no sidecar whose image is not built here.
func checkNodePlugin(t *testing.T, ds *appsv1.DaemonSet) {
	t.Helper()
	spec := &ds.Spec.Template.Spec
	var plugin *corev1.Container
	for i := range spec.Containers {
		switch c := &spec.Containers[i]; c.Name {
		case "longhorn-csi-plugin":
			plugin = c
		case "node-driver-registrar", "liveness-probe", "longhorn-liveness-probe":
			t.Errorf("the manager's pods run %s (%s), whose image is not built: the driver registers itself and serves its own /healthz", c.Name, c.Image)
		}
	}
	if plugin == nil {
		t.Fatal("the manager's pods run no longhorn-csi-plugin")
	}
	if sc := plugin.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Error("the Node service is not privileged: it needs /dev/fuse, loop devices and mount")
	}
	cmd := plugin.Command
	for _, a := range []string{"csi", "--node-id=$(NODE_NAME)", "--state-dir=$(LONGHORN_CSI_STATE_PATH)"} {
		if !slices.Contains(cmd, a) {
			t.Errorf("the Node service runs %v, without %s", cmd, a)
		}
	}
	if slices.Contains(cmd, "--controller") {
		t.Error("the Node service serves the Controller service too")
	}
	if !hasFieldEnv(plugin.Env, "NODE_NAME", "spec.nodeName") {
		t.Error("the Node service has no NODE_NAME from spec.nodeName")
	}
	hostMount := func(c *corev1.Container, path, hostPath string, propagation corev1.MountPropagationMode) {
		t.Helper()
		m := mountAt(c, path)
		if m == nil {
			t.Errorf("%s does not mount %s", c.Name, path)
			return
		}
		if v := volumeNamed(spec, m.Name); v == nil || v.HostPath == nil || v.HostPath.Path != hostPath {
			t.Errorf("%s's %s is not the host's %s", c.Name, path, hostPath)
		}
		got := corev1.MountPropagationNone
		if m.MountPropagation != nil {
			got = *m.MountPropagation
		}
		if got != propagation {
			t.Errorf("%s mounts %s with propagation %s, want %s", c.Name, path, got, propagation)
		}
	}
	// The staging and target paths the kubelet names are under its
	// directory: the driver's mounts must reach the host and the pods.
	hostMount(plugin, kubeletDir, kubeletDir, corev1.MountPropagationBidirectional)
	// Loop devices losetup makes appear in the host's /dev.
	hostMount(plugin, "/dev", "/dev", corev1.MountPropagationNone)
	// What was made for each staged volume outlives the container.
	hostMount(plugin, "/var/lib/longhorn-csi", "/var/lib/longhorn-csi", corev1.MountPropagationNone)
	// The kubelet dials the path the registration names, on the host: the
	// socket is in the kubelet's folder, mounted at the host's path (so
	// install-values.yaml's kubeletRootDir moves all of it), and so is the
	// registration socket, in its plugins_registry.
	env := map[string]string{}
	for _, e := range plugin.Env {
		env[e.Name] = e.Value
	}
	if env["KUBELET_ROOT_DIR"] != kubeletDir {
		t.Errorf("the Node service's KUBELET_ROOT_DIR is %q, want %s, where its kubelet-dir is mounted", env["KUBELET_ROOT_DIR"], kubeletDir)
	}
	socket := "$(KUBELET_ROOT_DIR)/plugins/" + csi.DriverName + "/csi.sock"
	for _, a := range []string{"--endpoint=unix://" + socket, "--kubelet-registration-path=" + socket, "--plugin-registration-dir=$(KUBELET_ROOT_DIR)/plugins_registry"} {
		if !slices.Contains(cmd, a) {
			t.Errorf("the Node service runs %v, without %s: the kubelet would not find it", cmd, a)
		}
	}
	checkLiveness(t, ds.Name, plugin)
}

// checkLiveness: c serves /healthz on the pod's IP (where the kubelet's
// probe reaches it) and its livenessProbe asks it, as Longhorn's plugin.
func checkLiveness(t *testing.T, pod string, c *corev1.Container) {
	t.Helper()
	addr := fmt.Sprintf("--health-address=$(POD_IP):%d", healthPort)
	if !slices.Contains(c.Command, addr) || !hasFieldEnv(c.Env, "POD_IP", "status.podIP") {
		t.Errorf("%s: %s runs %v: want %s with POD_IP from status.podIP", pod, c.Name, c.Command, addr)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "healthz" && p.ContainerPort == healthPort }) {
		t.Errorf("%s: %s has no port healthz (%d): %v", pod, c.Name, healthPort, c.Ports)
	}
	p := c.LivenessProbe
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.String() != "healthz" {
		t.Errorf("%s: %s's livenessProbe %+v does not GET /healthz on port healthz", pod, c.Name, p)
		return
	}
	// Its own check waits 3 s (--health-probe-timeout): the kubelet's
	// must wait longer to read the reason.
	if p.InitialDelaySeconds != 3 || p.TimeoutSeconds != 4 || p.PeriodSeconds != 5 || p.FailureThreshold != 3 {
		t.Errorf("%s: %s's livenessProbe waits %d s, times out after %d s, every %d s, %d failures: want Longhorn's 3, 4, 5, 3",
			pod, c.Name, p.InitialDelaySeconds, p.TimeoutSeconds, p.PeriodSeconds, p.FailureThreshold)
	}
}

// checkCSIRBAC asks the apiserver whether the sidecars' accounts may do
// what the sidecars (external-provisioner v6, external-attacher v4, their
// clients) and their drivers (through the manager's API, with
// --api-auth=kubernetes) do, and may not do what they never do.
func checkCSIRBAC(t *testing.T, kube kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	type attr = authorizationv1.ResourceAttributes
	core := func(verb, resource, namespace string) attr {
		return attr{Verb: verb, Resource: resource, Namespace: namespace}
	}
	storage := func(verb, resource string) attr {
		return attr{Verb: verb, Group: "storage.k8s.io", Resource: resource}
	}
	lh := func(verb, resource, name string) attr {
		return attr{Verb: verb, Group: "longhorn.io", Resource: resource, Namespace: ns, Name: name}
	}
	// action is update on the volume's subresource named after an action.
	action := func(name string) attr {
		return attr{Verb: "update", Group: "longhorn.io", Resource: "volumes", Subresource: name, Namespace: ns, Name: "pvc-1"}
	}
	lease := func(verb, name string) attr {
		return attr{Verb: verb, Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: name}
	}
	// The Lease each sidecar's leader election takes (csi-lib-utils: the
	// lock name with every character but letters, digits and - made -).
	sanitize := func(s string) string { return regexp.MustCompile(`[^a-zA-Z0-9-]`).ReplaceAllString(s, "-") }
	provisionerLease := sanitize(strings.ReplaceAll(csi.DriverName, "/", "-"))
	attacherLease := sanitize("external-attacher-leader-" + csi.DriverName)
	snapshotterLease := sanitize("external-snapshotter-leader-" + csi.DriverName)
	resizerLease := sanitize("external-resizer-" + csi.DriverName)
	snapshots := func(verb, resource string) attr {
		return attr{Verb: verb, Group: "snapshot.storage.k8s.io", Resource: resource}
	}
	const claims = "a-users-namespace"

	for _, c := range []struct {
		account      string
		allow, never []attr
	}{{
		account: "longhorn-csi-provisioner",
		allow: []attr{
			core("get", "persistentvolumes", ""), core("list", "persistentvolumes", ""), core("watch", "persistentvolumes", ""),
			core("create", "persistentvolumes", ""), core("patch", "persistentvolumes", ""), core("delete", "persistentvolumes", ""),
			core("list", "persistentvolumeclaims", ""), core("watch", "persistentvolumeclaims", ""),
			core("get", "persistentvolumeclaims", claims), core("update", "persistentvolumeclaims", claims),
			storage("get", "storageclasses"), storage("list", "storageclasses"), storage("watch", "storageclasses"),
			storage("list", "volumeattachments"), storage("watch", "volumeattachments"),
			core("create", "events", claims), core("patch", "events", claims),
			lease("create", ""), lease("get", provisionerLease), lease("update", provisionerLease),
			lh("get", "settings", "backup-target"),
			lh("get", "volumes", "pvc-1"), lh("list", "volumes", ""), lh("create", "volumes", ""), lh("delete", "volumes", "pvc-1"),
			core("list", "nodes", ""), storage("list", "csinodes"),
			lh("list", "recurringjobs", ""), lh("create", "recurringjobs", ""), lh("delete", "recurringjobs", "snapshot-1-x-y"),
			lh("get", "backingimages", "image"), lh("create", "backingimages", ""),
			lh("get", "backupvolumes", "pvc-1"), lh("list", "backupvolumes", ""),
			// A claim restored from a VolumeSnapshot: the snapshot and its
			// content, read for the handle (refused on the real node before).
			{Verb: "get", Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots", Namespace: claims, Name: "snap-1"},
			{Verb: "get", Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotcontents", Name: "snapcontent-1"},
			// A topology's node, read before a volume is placed on it.
			lh("get", "nodes", "node-1"),
			// Storage capacity tracking: its CSIStorageCapacity objects,
			// its pod and ReplicaSet (for their owner), and GetCapacity's
			// setting and nodes.
			{Verb: "create", Group: "storage.k8s.io", Resource: "csistoragecapacities", Namespace: ns},
			{Verb: "update", Group: "storage.k8s.io", Resource: "csistoragecapacities", Namespace: ns, Name: "csisc-1"},
			{Verb: "delete", Group: "storage.k8s.io", Resource: "csistoragecapacities", Namespace: ns, Name: "csisc-1"},
			{Verb: "watch", Group: "storage.k8s.io", Resource: "csistoragecapacities", Namespace: ns},
			core("get", "pods", ns), {Verb: "get", Group: "apps", Resource: "replicasets", Namespace: ns, Name: "csi-provisioner-1"},
			lh("get", "settings", "storage-over-provisioning-percentage"), lh("get", "settings", "storage-minimal-available-percentage"),
			lh("get", "settings", "replica-soft-anti-affinity"), lh("list", "nodes", ""),
		},
		never: []attr{
			core("get", "secrets", claims), core("list", "secrets", ""), core("create", "pods", ns),
			lh("update", "nodes", "node-1"),
			storage("patch", "volumeattachments"),
			{Verb: "list", Group: "snapshot.storage.k8s.io", Resource: "volumesnapshots"},
			core("update", "persistentvolumes", ""), core("delete", "persistentvolumeclaims", claims),
			lease("get", attacherLease), lease("delete", provisionerLease),
			lh("get", "settings", "backup-target-credential-secret"), lh("update", "settings", "backup-target"),
			lh("update", "volumes", "pvc-1"), lh("update", "recurringjobs", "snapshot-1-x-y"),
			lh("delete", "backingimages", "image"), lh("delete", "backupvolumes", "pvc-1"), lh("delete", "backups", "b"),
			// Its longhorn.io rights are in the manager's namespace only.
			{Verb: "get", Group: "longhorn.io", Resource: "volumes", Namespace: claims, Name: "pvc-1"},
			// Capacity objects in its own namespace only; no pod but read.
			{Verb: "create", Group: "storage.k8s.io", Resource: "csistoragecapacities", Namespace: claims},
			core("list", "pods", ns), core("delete", "pods", ns),
		},
	}, {
		account: "longhorn-csi-attacher",
		allow: []attr{
			core("get", "persistentvolumes", ""), core("list", "persistentvolumes", ""), core("watch", "persistentvolumes", ""),
			core("patch", "persistentvolumes", ""),
			storage("get", "csinodes"), storage("list", "csinodes"), storage("watch", "csinodes"),
			storage("get", "volumeattachments"), storage("list", "volumeattachments"), storage("watch", "volumeattachments"),
			storage("patch", "volumeattachments"),
			{Verb: "patch", Group: "storage.k8s.io", Resource: "volumeattachments", Subresource: "status"},
			lease("create", ""), lease("get", attacherLease), lease("update", attacherLease),
			core("create", "events", ns), core("patch", "events", ns),
			lh("get", "settings", "backup-target"), lh("get", "nodes", "node-1"),
			lh("get", "volumes", "pvc-1"), action("attach"), action("detach"),
		},
		never: []attr{
			core("get", "secrets", ns), core("create", "persistentvolumes", ""), core("delete", "persistentvolumes", ""),
			core("list", "persistentvolumeclaims", ""), core("list", "nodes", ""),
			storage("create", "volumeattachments"), storage("delete", "volumeattachments"),
			core("create", "events", claims), lease("get", provisionerLease),
			lh("create", "volumes", ""), lh("delete", "volumes", "pvc-1"), lh("list", "volumes", ""),
			lh("update", "nodes", "node-1"), lh("list", "recurringjobs", ""),
			lh("update", "volumes", "pvc-1"), action("expand"), action("snapshotCreate"), action("snapshotRevert"),
		},
	}, {
		account: "longhorn-csi-snapshotter",
		allow: []attr{
			snapshots("get", "volumesnapshotclasses"), snapshots("list", "volumesnapshotclasses"), snapshots("watch", "volumesnapshotclasses"),
			snapshots("get", "volumesnapshotcontents"), snapshots("list", "volumesnapshotcontents"), snapshots("watch", "volumesnapshotcontents"),
			snapshots("update", "volumesnapshotcontents"), snapshots("patch", "volumesnapshotcontents"),
			{Verb: "patch", Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotcontents", Subresource: "status"},
			{Verb: "update", Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotcontents", Subresource: "status"},
			core("create", "events", "default"), core("patch", "events", "default"),
			lease("create", ""), lease("get", snapshotterLease), lease("update", snapshotterLease),
			lh("get", "settings", "backup-target"),
			lh("get", "volumes", "pvc-1"), lh("list", "volumes", ""),
			action("snapshotCreate"), action("snapshotBackup"), action("snapshotCRDelete"), action("attach"), action("detach"),
			lh("get", "backupvolumes", "pvc-1"), lh("list", "backupvolumes", ""), lh("delete", "backups", ""),
			// A bi VolumeSnapshot: the backing image exported from the volume.
			lh("get", "backingimages", "snapshot-1"), lh("create", "backingimages", ""), lh("delete", "backingimages", "snapshot-1"),
		},
		never: []attr{
			core("get", "secrets", ns), core("get", "persistentvolumeclaims", claims), core("list", "persistentvolumes", ""),
			snapshots("create", "volumesnapshotcontents"), snapshots("delete", "volumesnapshotcontents"),
			snapshots("update", "volumesnapshots"), snapshots("create", "volumesnapshotclasses"),
			{Verb: "list", Group: "groupsnapshot.storage.k8s.io", Resource: "volumegroupsnapshotcontents"},
			lease("get", attacherLease), lease("delete", snapshotterLease),
			lh("create", "volumes", ""), lh("delete", "volumes", "pvc-1"), lh("update", "settings", "backup-target"),
			lh("get", "settings", "backup-target-credential-secret"), lh("create", "backups", ""),
			lh("update", "backupvolumes", "pvc-1"), lh("delete", "backupvolumes", "pvc-1"),
			lh("update", "volumes", "pvc-1"), action("snapshotRevert"), action("snapshotDelete"), action("expand"),
			lh("update", "backingimages", "snapshot-1"), lh("list", "backingimages", ""),
		},
	}, {
		account: "longhorn-csi-resizer",
		allow: []attr{
			core("get", "persistentvolumes", ""), core("list", "persistentvolumes", ""), core("watch", "persistentvolumes", ""),
			core("patch", "persistentvolumes", ""),
			core("get", "persistentvolumeclaims", claims), core("list", "persistentvolumeclaims", ""), core("watch", "persistentvolumeclaims", ""),
			{Verb: "patch", Resource: "persistentvolumeclaims", Subresource: "status", Namespace: claims},
			core("create", "events", claims), core("patch", "events", claims),
			storage("list", "volumeattributesclasses"), storage("watch", "volumeattributesclasses"),
			lease("create", ""), lease("get", resizerLease), lease("update", resizerLease),
			lh("get", "settings", "backup-target"), lh("get", "volumes", "pvc-1"), action("expand"),
		},
		never: []attr{
			core("get", "secrets", claims), core("list", "pods", ""), core("create", "persistentvolumes", ""),
			core("delete", "persistentvolumes", ""), core("update", "persistentvolumeclaims", claims),
			storage("patch", "volumeattachments"), storage("update", "volumeattributesclasses"),
			lease("get", attacherLease), lease("get", provisionerLease), lease("get", snapshotterLease),
			lh("create", "volumes", ""), lh("delete", "volumes", "pvc-1"), lh("list", "volumes", ""),
			lh("get", "nodes", "node-1"), lh("list", "recurringjobs", ""),
			lh("update", "volumes", "pvc-1"), action("attach"), action("detach"), action("snapshotCreate"),
		},
	}} {
		user := "system:serviceaccount:" + ns + ":" + c.account
		may := func(a attr) (bool, error) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               user,
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &a,
			}}
			got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				return false, err
			}
			return got.Status.Allowed, nil
		}
		for _, a := range c.allow {
			// The authorizer learns of new bindings from a watch.
			framework.Eventually(t, 10*time.Second, c.account+" may "+describe(a), func() (bool, error) { return may(a) })
		}
		for _, a := range c.never {
			if ok, err := may(a); err != nil || ok {
				t.Errorf("%s may %s (err %v): neither the sidecar nor its driver needs it", c.account, describe(a), err)
			}
		}
	}
}

func describe(a authorizationv1.ResourceAttributes) string {
	s := a.Verb + " " + a.Resource
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	if a.Group != "" {
		s += "." + a.Group
	}
	if a.Name != "" {
		s += " " + a.Name
	}
	if a.Namespace != "" {
		s += " in " + a.Namespace
	}
	return s
}

// policyAdmits says whether p lets a pod of this namespace with podLabels
// reach port.
func policyAdmits(p *networkingv1.NetworkPolicy, port int32, podLabels map[string]string) bool {
	for _, rule := range p.Spec.Ingress {
		if !slices.ContainsFunc(rule.Ports, func(rp networkingv1.NetworkPolicyPort) bool { return rp.Port != nil && rp.Port.IntVal == port }) {
			continue
		}
		for _, peer := range rule.From {
			if peer.PodSelector == nil || peer.IPBlock != nil {
				continue
			}
			sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
			if err == nil && sel.Matches(labels.Set(podLabels)) {
				return true
			}
		}
	}
	return false
}

// expandArgs replaces $(VAR) in args with the value of env's VAR, as the
// kubelet does, leaving those from the downward API.
func expandArgs(args []string, env []corev1.EnvVar) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for _, e := range env {
			if e.ValueFrom == nil {
				a = strings.ReplaceAll(a, "$("+e.Name+")", e.Value)
			}
		}
		out[i] = a
	}
	return out
}

func hasFieldEnv(env []corev1.EnvVar, name, field string) bool {
	return slices.ContainsFunc(env, func(e corev1.EnvVar) bool {
		return e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == field
	})
}

func mountAt(c *corev1.Container, path string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].MountPath == path {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func volumeNamed(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}
