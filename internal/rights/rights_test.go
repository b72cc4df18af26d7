package rights

import (
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// TestWhatACreateReads: each kind's reads, as a refusal names them.
func TestWhatACreateReads(t *testing.T) {
	str := func(cs []Check) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.String())
		}
		return out
	}
	for _, tc := range []struct {
		name string
		got  []Check
		want []string
	}{
		{"an image exported from a volume", BackingImageReads("ns", longhorn.BackingImageDataSourceTypeExportFromVolume,
			map[string]string{longhorn.DataSourceParameterVolumeName: "victim"}), []string{`get volumes.longhorn.io "victim" in ns`}},
		{"a downloaded image", BackingImageReads("ns", longhorn.BackingImageDataSourceTypeDownload, map[string]string{"url": "http://x"}), nil},
		{"a target's credential", BackupTargetReads("ns", "cred"), []string{`get secrets "cred" in ns`}},
		{"a target with none", BackupTargetReads("ns", ""), nil},
		{"a volume's sources", VolumeReads("ns", "bv-1", "src", "golden"),
			[]string{`get backupvolumes.longhorn.io "bv-1" in ns`, `get volumes.longhorn.io "src" in ns`, `get backingimages.longhorn.io "golden" in ns`}},
		{"a volume of nothing", VolumeReads("ns", "", "", ""), nil},
		{"a cluster-wide create", []Check{Core("create", "persistentvolumes", "", "")}, []string{"create persistentvolumes"}},
	} {
		if got := str(tc.got); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestAReviewAsksAboutTheWholeUser: groups, uid and extra are asked
// about, as an authorizer may judge each.
func TestAReviewAsksAboutTheWholeUser(t *testing.T) {
	user := authenticationv1.UserInfo{Username: "jane", UID: "u-1", Groups: []string{"dev"}, Extra: map[string]authenticationv1.ExtraValue{"scopes": {"restore"}}}
	spec := ReviewSpec(user, Core("create", "persistentvolumeclaims", "app", "").Attributes())
	if spec.User != "jane" || spec.UID != "u-1" || !slices.Equal(spec.Groups, []string{"dev"}) || !slices.Equal([]string(spec.Extra["scopes"]), []string{"restore"}) {
		t.Errorf("review of %+v", spec)
	}
	if ra := spec.ResourceAttributes; ra == nil || ra.Verb != "create" || ra.Group != "" || ra.Resource != "persistentvolumeclaims" || ra.Namespace != "app" {
		t.Errorf("attributes %+v", spec.ResourceAttributes)
	}
}
