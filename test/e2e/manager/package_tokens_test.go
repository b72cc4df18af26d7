//go:build e2e

package manager

import (
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cadence-storage/longhorn-manager/mtls"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
	"github.com/cadence-storage/longhorn-manager/types"
)

// deployedPods are the pods package/ deploys that run the manager's
// binary, and their files and names.
func deployedPods(t *testing.T) (pods []corev1.PodSpec, names []string) {
	t.Helper()
	for _, file := range []string{"longhorn-manager.yaml", "csi.yaml", "longhorn-ui.yaml"} {
		for _, obj := range framework.ReadManifests(t, file) {
			switch o := obj.(type) {
			case *appsv1.DaemonSet:
				pods, names = append(pods, o.Spec.Template.Spec), append(names, file+" "+o.Name)
			case *appsv1.Deployment:
				pods, names = append(pods, o.Spec.Template.Spec), append(names, file+" "+o.Name)
			}
		}
	}
	return pods, names
}

// flag is the value of --name=value in a container's command.
func flag(cmd []string, name string) string {
	for _, a := range cmd {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// Every caller of the manager's API that package/ deploys with an
// identity of its own (the manager's own runner, the CSI Node and
// Controller services) sends a ServiceAccount token projected for the
// audience the manager accepts (--api-token-audience), read from a file
// the kubelet renews: a caller left with its default token would be
// refused, and a token made for the API is no credential at the
// apiserver. The UI's server sends the browser's token as deployed, and
// its own (--token-file, with identity headers) only when configured so:
// then it must be of that audience too.
func TestEveryCallerOfTheAPISendsATokenOfItsAudience(t *testing.T) {
	pods, names := deployedPods(t)
	audience := ""
	for _, pod := range pods {
		for _, c := range pod.Containers {
			if v := flag(c.Command, "--api-token-audience"); v != "" {
				audience = v
			}
		}
	}
	if audience == "" {
		t.Fatal("the manager runs with no --api-token-audience: the API takes any token the apiserver does")
	}
	callers := 0
	for i, pod := range pods {
		for _, c := range pod.Containers {
			ui := len(c.Command) > 1 && c.Command[0] == "longhorn-manager" && c.Command[1] == "ui"
			calls := flag(c.Command, "--manager-url") != "" || flag(c.Command, "--api-token-audience") != ""
			if !calls || ui && flag(c.Command, "--token-file") == "" {
				continue
			}
			callers++
			file := flag(c.Command, "--api-token-file")
			if file == "" {
				file = flag(c.Command, "--token-file")
			}
			if file == "" {
				t.Errorf("%s, container %s calls the API with no token file of its audience", names[i], c.Name)
				continue
			}
			var volume string
			for _, m := range c.VolumeMounts {
				if m.MountPath == path.Dir(file) {
					volume = m.Name
				}
			}
			ok := false
			for _, v := range pod.Volumes {
				if v.Name != volume || v.Projected == nil {
					continue
				}
				for _, src := range v.Projected.Sources {
					if sat := src.ServiceAccountToken; sat != nil && sat.Audience == audience && sat.Path == path.Base(file) {
						ok = true
					}
				}
			}
			if !ok {
				t.Errorf("%s, container %s: %s is not a token projected for audience %q", names[i], c.Name, file, audience)
			}
		}
	}
	// The manager, its CSI Node service, four CSI controller pods.
	if callers < 6 {
		t.Errorf("found %d callers of the API in package/, want at least 6", callers)
	}
}

// The API is served over TLS as deployed, and every caller reaches it at
// an https:// URL and checks its certificate with the internal CA's
// certificates (the ConfigMap the managers publish, mounted optional at
// --manager-ca-file's path): a token never crosses the pod network in the
// clear. The manager's probes speak HTTPS.
func TestEveryCallerOfTheAPIChecksItsCertificate(t *testing.T) {
	pods, names := deployedPods(t)
	served, callers := false, 0
	for i, pod := range pods {
		for _, c := range pod.Containers {
			if slices.Contains(c.Command, "daemon") {
				served = slices.Contains(c.Command, "--api-tls")
				for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
					if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
						t.Errorf("%s, container %s: a probe of the API not over HTTPS: %+v", names[i], c.Name, p)
					}
				}
				continue
			}
			url := flag(c.Command, "--manager-url")
			if url == "" {
				continue
			}
			callers++
			if !strings.HasPrefix(url, "https://") {
				t.Errorf("%s, container %s calls the API at %s, not over TLS", names[i], c.Name, url)
			}
			caFile := flag(c.Command, "--manager-ca-file")
			if caFile == "" {
				caFile = types.ManagerCAPath
			}
			var volume string
			for _, m := range c.VolumeMounts {
				if m.MountPath == path.Dir(caFile) {
					volume = m.Name
				}
			}
			ok := false
			for _, v := range pod.Volumes {
				if v.Name == volume && v.ConfigMap != nil && v.ConfigMap.Name == mtls.CAConfigMapName && v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s, container %s: %s is not the ConfigMap %s, mounted optional", names[i], c.Name, caFile, mtls.CAConfigMapName)
			}
		}
	}
	if !served {
		t.Error("the manager does not serve its API over TLS (--api-tls)")
	}
	// The CSI Node service, four CSI controller pods, the UI.
	if callers < 6 {
		t.Errorf("found %d callers of the API in package/, want at least 6", callers)
	}
}
