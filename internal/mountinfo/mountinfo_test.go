package mountinfo

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	table := `22 1 0:21 / /sys rw,nosuid shared:7 - sysfs sysfs rw
95 29 7:3 / /var/lib/kubelet/plugins/x/globalmount rw,relatime shared:50 master:1 - ext4 /dev/loop3 rw
97 29 7:4 / /mnt/with\040space rw - xfs /dev/loop4 rw
98 29 7:5 / /tmp/short
`
	got, err := Parse(strings.NewReader(table))
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{
		{Dev: "0:21", Point: "/sys", Options: "rw,nosuid", FsType: "sysfs", Source: "sysfs"},
		{Dev: "7:3", Point: "/var/lib/kubelet/plugins/x/globalmount", Options: "rw,relatime", FsType: "ext4", Source: "/dev/loop3"},
		{Dev: "7:4", Point: "/mnt/with space", Options: "rw", FsType: "xfs", Source: "/dev/loop4"},
	}
	if len(got) != len(want) {
		t.Fatalf("read %+v, want %+v (the short line left out)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
