package manager

import (
	"path"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// Every caller of the manager's API that package/ deploys (the manager's
// own runner, the CSI Node and Controller services, the UI's server)
// sends a ServiceAccount token projected for the audience the manager
// accepts (--api-token-audience), read from a file the kubelet renews: a
// caller left with its default token would be refused, and a token made
// for the API is no credential at the apiserver.
func TestEveryCallerOfTheAPISendsATokenOfItsAudience(t *testing.T) {
	var pods []corev1.PodSpec
	var names []string
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
	flag := func(cmd []string, name string) string {
		for _, a := range cmd {
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
		return ""
	}
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
			calls := flag(c.Command, "--manager-url") != "" || (len(c.Command) > 1 && c.Command[0] == "longhorn-manager" && c.Command[1] == "ui") ||
				flag(c.Command, "--api-token-audience") != ""
			if !calls {
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
	// The manager, its CSI Node service, four CSI controller pods, the UI.
	if callers < 7 {
		t.Errorf("found %d callers of the API in package/, want at least 7", callers)
	}
}
