package csi

import (
	"strings"
	"testing"
)

func TestVolumeNamesFromCSINames(t *testing.T) {
	long := strings.Repeat("a", 128)
	for _, c := range []struct{ in, want string }{
		{"pvc-0b9e1f3c-6a1f-4a36-9d0f-0c2b1f1f2a11", "pvc-0b9e1f3c-6a1f-4a36-9d0f-0c2b1f1f2a11"},
		{"Sanity-Vol", "sanity-vol-"},
		{"sanity-vol", "sanity-vol"},
		{"a/b c", "a-b-c-"},
		{"__x", "x-"},
		{"---", "v-"},
		{long, strings.Repeat("a", 54) + "-"},
	} {
		got := volumeName(c.in)
		if !strings.HasPrefix(got, c.want) || len(got) > volumeNameMaxLength || (strings.HasSuffix(c.want, "-") && len(got) != len(c.want)+8) {
			t.Errorf("volumeName(%q) = %q, want %q plus a hash where it ends in -", c.in, got, c.want)
		}
		if volumeName(c.in) != got {
			t.Errorf("volumeName(%q) is not stable", c.in)
		}
	}
	if volumeName("A") == volumeName("a") || volumeName(long) == volumeName(long+"b") {
		t.Error("two CSI names gave one volume")
	}
}
