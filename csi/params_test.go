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

func TestParamsRefuseWhatTheyCannotHonour(t *testing.T) {
	for _, c := range []struct {
		params map[string]string
		err    string
	}{
		{map[string]string{"dataLocality": "best-effort"}, `dataLocality: best-effort moves a replica`},
		{map[string]string{"dataLocality": "strict-local"}, "numberOfReplicas must be 1, got 3"},
		{map[string]string{"dataLocality": "strict-local", "numberOfReplicas": "1"}, ""},
		{map[string]string{"dataLocality": "nearby"}, `dataLocality: must be disabled, best-effort or strict-local, got "nearby"`},
		{map[string]string{"dataLocality": "disabled", "migratable": "false"}, ""},
		{map[string]string{"numberOfReplicas": "0"}, "numberOfReplicas: must be a whole number from 1 to 20"},
		{map[string]string{"replicas": "3", "zone": "a"}, "parameters replicas, zone: not parameters this driver knows"},
		{map[string]string{"csi.storage.k8s.io/fstype": "ext4"}, ""},
		{map[string]string{"backingImageChecksum": "abc"}, "need backingImage"},
		{map[string]string{"dataEngine": "v2"}, `dataEngine: only "v1" exists here`},
		{map[string]string{"recurringJobs": "- task: snapshot\n  cron: '* * * * *'\n  retain: 1\n  bogus: x"}, "recurringJobs: must be a YAML or JSON list"},
		// Anti-affinity and selectors go to the replica scheduler.
		{map[string]string{"replicaSoftAntiAffinity": "disabled", "numberOfReplicas": "3"}, ""},
		{map[string]string{"replicaZoneSoftAntiAffinity": "enabled", "replicaDiskSoftAntiAffinity": "ignored"}, ""},
		{map[string]string{"replicaDiskSoftAntiAffinity": "sometimes"}, "replicaDiskSoftAntiAffinity: must be ignored (the setting decides), enabled or disabled"},
		{map[string]string{"nodeSelector": "ssd, fast", "diskSelector": ""}, ""},
		{map[string]string{"diskSelector": "nvme,bad tag"}, `diskSelector: tag "bad tag"`},
		{map[string]string{"backingImage": "img", "backingImageMinNumberOfCopies": "2"}, ""},
		{map[string]string{"backingImage": "img", "backingImageMinNumberOfCopies": "0"}, "backingImageMinNumberOfCopies: must be a whole number from 1 to 20"},
		{map[string]string{"backingImageMinNumberOfCopies": "2"}, "need backingImage"},
		{map[string]string{"backingImage": "img", "backingImageNodeSelector": "ssd"}, `backingImageNodeSelector: this driver cannot honour "ssd"`},
		// mkfsParams go to mkfs as words, never a path.
		{map[string]string{"mkfsParams": "-I 256 -b 4096 -O ^metadata_csum,^64bit -L data_1"}, ""},
		{map[string]string{"mkfsParams": "-b 4096 /dev/sda"}, `mkfsParams: "/dev/sda" holds '/'`},
		{map[string]string{"mkfsParams": "-E $(reboot)"}, `mkfsParams: "$(reboot)" holds '$'`},
		{map[string]string{"mkfsParams": strings.Repeat("-q ", 33)}, "mkfsParams: at most 32 words, got 33"},
	} {
		_, err := parseParams(c.params)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("parseParams(%v): %v, want %q", c.params, err, c.err)
		}
	}
}

func TestPlacementParamsReachTheVolume(t *testing.T) {
	p, err := parseParams(map[string]string{"replicaSoftAntiAffinity": "disabled", "replicaZoneSoftAntiAffinity": "enabled",
		"nodeSelector": "ssd, fast", "diskSelector": "nvme"})
	if err != nil {
		t.Fatal(err)
	}
	c := p.create
	if c.ReplicaSoftAntiAffinity != "disabled" || c.ReplicaZoneSoftAntiAffinity != "enabled" || c.ReplicaDiskSoftAntiAffinity != "" ||
		strings.Join(c.NodeSelector, ",") != "ssd,fast" || strings.Join(c.DiskSelector, ",") != "nvme" {
		t.Fatalf("volume create %+v", c)
	}
}
