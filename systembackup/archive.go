package systembackup

import (
	"archive/zip"
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Limits on what Parse reads: the entries of an archive, and one
// entry's size once inflated.
const (
	maxEntries   = 256
	maxEntrySize = 32 << 20
)

// Meta is metadata.yaml, with Longhorn's field names.
type Meta struct {
	LonghornVersion       string      `json:"longhornVersion"`
	LonghornGitCommit     string      `json:"longhornGitCommit"`
	KubernetesVersion     string      `json:"kubernetesVersion"`
	LonghornNamespaceUUID string      `json:"longhornNamspaceUUID"`
	SystemBackupCreatedAt metav1.Time `json:"systemBackupCreatedAt"`
	ManagerImage          string      `json:"managerImage"`
}

// Contents are the objects an archive holds.
type Contents struct {
	Meta          Meta
	Settings      []longhorn.Setting
	Volumes       []longhorn.Volume
	RecurringJobs []longhorn.RecurringJob
	BackingImages []longhorn.BackingImage
	BackupTargets []longhorn.BackupTarget
	// PersistentVolumes and PersistentVolumeClaims bound to Longhorn
	// volumes, where there are any.
	PersistentVolumes      []corev1.PersistentVolume
	PersistentVolumeClaims []corev1.PersistentVolumeClaim
}

// file is one List file of an archive: its path under <name>/yamls, the
// List's kind, and how it is read into and out of Contents.
type file struct {
	path, kind string
	get        func(*Contents) any
	set        func(*Contents, []byte) error
}

func listOf[T any](kind, apiVersion string, items []T) any {
	return struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Items      []T    `json:"items"`
	}{apiVersion, kind, items}
}

func decodeList[T any](data []byte, kind string, out *[]T) error {
	var l struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Items      []T    `json:"items"`
	}
	// Fields this manager does not know are Longhorn's of another
	// version: they are left out, the kind is still checked.
	if err := yaml.Unmarshal(data, &l); err != nil {
		return err
	}
	if l.Kind != kind {
		return fmt.Errorf("kind %q, want %q", l.Kind, kind)
	}
	*out = l.Items
	return nil
}

var lhAPIVersion = longhorn.SchemeGroupVersion.String()

var files = []file{
	{"longhorn/setting.yaml", "SettingList", func(c *Contents) any { return listOf("SettingList", lhAPIVersion, c.Settings) },
		func(c *Contents, b []byte) error { return decodeList(b, "SettingList", &c.Settings) }},
	{"longhorn/volumes.yaml", "VolumeList", func(c *Contents) any { return listOf("VolumeList", lhAPIVersion, c.Volumes) },
		func(c *Contents, b []byte) error { return decodeList(b, "VolumeList", &c.Volumes) }},
	{"longhorn/recurringjobs.yaml", "RecurringJobList", func(c *Contents) any { return listOf("RecurringJobList", lhAPIVersion, c.RecurringJobs) },
		func(c *Contents, b []byte) error { return decodeList(b, "RecurringJobList", &c.RecurringJobs) }},
	{"longhorn/backingimages.yaml", "BackingImageList", func(c *Contents) any { return listOf("BackingImageList", lhAPIVersion, c.BackingImages) },
		func(c *Contents, b []byte) error { return decodeList(b, "BackingImageList", &c.BackingImages) }},
	{"longhorn/backuptargets.yaml", "BackupTargetList", func(c *Contents) any { return listOf("BackupTargetList", lhAPIVersion, c.BackupTargets) },
		func(c *Contents, b []byte) error { return decodeList(b, "BackupTargetList", &c.BackupTargets) }},
	{"kubernetes/persistentvolumes.yaml", "PersistentVolumeList", func(c *Contents) any { return listOf("PersistentVolumeList", "v1", c.PersistentVolumes) },
		func(c *Contents, b []byte) error { return decodeList(b, "PersistentVolumeList", &c.PersistentVolumes) }},
	{"kubernetes/persistentvolumeclaims.yaml", "PersistentVolumeClaimList", func(c *Contents) any { return listOf("PersistentVolumeClaimList", "v1", c.PersistentVolumeClaims) },
		func(c *Contents, b []byte) error {
			return decodeList(b, "PersistentVolumeClaimList", &c.PersistentVolumeClaims)
		}},
}

// Build writes the archive of a system backup named name.
func Build(name string, c *Contents) ([]byte, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	put := func(p string, v any) error {
		data, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		f, err := w.CreateHeader(&zip.FileHeader{Name: name + "/" + p, Method: zip.Deflate, Modified: c.Meta.SystemBackupCreatedAt.UTC()})
		if err != nil {
			return err
		}
		_, err = f.Write(data)
		return err
	}
	if err := put("metadata.yaml", c.Meta); err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := put("yamls/"+f.path, f.get(c)); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Parse reads and checks the archive of the system backup named name.
// Entries it does not know (Longhorn's archives hold Kubernetes objects
// this manager does not restore) are skipped; a file it knows that is
// malformed, an entry out of <name>/, too many or too large entries, or
// an object that could not be created as it is, is an error naming it.
func Parse(name string, data []byte) (c *Contents, err error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if len(data) > MaxArchiveSize {
		return nil, fmt.Errorf("archive of %d bytes, more than %d", len(data), MaxArchiveSize)
	}
	r, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("archive: %w", err)
	}
	if len(r.File) > maxEntries {
		return nil, fmt.Errorf("archive: %d entries, more than %d", len(r.File), maxEntries)
	}
	known := map[string]file{}
	for _, f := range files {
		known[name+"/yamls/"+f.path] = f
	}
	c = &Contents{}
	seen := map[string]bool{}
	for _, zf := range r.File {
		p := zf.Name
		if path.Clean(p) != strings.TrimSuffix(p, "/") || path.IsAbs(p) || !strings.HasPrefix(p, name+"/") {
			return nil, fmt.Errorf("archive entry %q: not under %s/", p, name)
		}
		f, isList := known[p]
		if p != name+"/metadata.yaml" && !isList {
			continue
		}
		if seen[p] {
			return nil, fmt.Errorf("archive entry %q: twice", p)
		}
		seen[p] = true
		b, err := readEntry(zf)
		if err != nil {
			return nil, fmt.Errorf("archive entry %q: %w", p, err)
		}
		if !isList {
			if err := yaml.Unmarshal(b, &c.Meta); err != nil {
				return nil, fmt.Errorf("archive entry %q: %w", p, err)
			}
			continue
		}
		if err := f.set(c, b); err != nil {
			return nil, fmt.Errorf("archive entry %q: %w", p, err)
		}
	}
	if !seen[name+"/metadata.yaml"] {
		return nil, fmt.Errorf("archive: no %s/metadata.yaml", name)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func readEntry(zf *zip.File) ([]byte, error) {
	if zf.UncompressedSize64 > maxEntrySize {
		return nil, fmt.Errorf("%d bytes, more than %d", zf.UncompressedSize64, maxEntrySize)
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	// The header's size is the writer's word: read one byte past the
	// limit to tell a lie.
	b, err := io.ReadAll(io.LimitReader(rc, maxEntrySize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxEntrySize {
		return nil, fmt.Errorf("more than %d bytes", maxEntrySize)
	}
	return b, nil
}

// validate checks every object could be created as it is: a valid,
// unique name, and for volumes a size.
func (c *Contents) validate() error {
	names := func(kind string, list []string) error {
		seen := map[string]bool{}
		for _, n := range list {
			if err := CheckName(n); err != nil {
				return fmt.Errorf("%s: %w", kind, err)
			}
			if seen[n] {
				return fmt.Errorf("%s %q: twice", kind, n)
			}
			seen[n] = true
		}
		return nil
	}
	checks := []struct {
		kind string
		list []string
	}{
		{"Setting", namesOf(c.Settings, func(o longhorn.Setting) string { return o.Name })},
		{"Volume", namesOf(c.Volumes, func(o longhorn.Volume) string { return o.Name })},
		{"RecurringJob", namesOf(c.RecurringJobs, func(o longhorn.RecurringJob) string { return o.Name })},
		{"BackingImage", namesOf(c.BackingImages, func(o longhorn.BackingImage) string { return o.Name })},
		{"BackupTarget", namesOf(c.BackupTargets, func(o longhorn.BackupTarget) string { return o.Name })},
		{"PersistentVolume", namesOf(c.PersistentVolumes, func(o corev1.PersistentVolume) string { return o.Name })},
		{"PersistentVolumeClaim", namesOf(c.PersistentVolumeClaims, func(o corev1.PersistentVolumeClaim) string { return o.Namespace + "." + o.Name })},
	}
	for _, ch := range checks {
		if err := names(ch.kind, ch.list); err != nil {
			return err
		}
	}
	volumes := map[string]bool{}
	for _, v := range c.Volumes {
		if v.Spec.Size <= 0 {
			return fmt.Errorf("Volume %q: spec.size %d is not a size", v.Name, v.Spec.Size)
		}
		volumes[v.Name] = true
	}
	// A PersistentVolume is restored only as what it was archived for:
	// an archived Longhorn volume's, and nothing else (a hostPath one,
	// say, would give a claim the node's files).
	pvs := map[string]bool{}
	for _, pv := range c.PersistentVolumes {
		csi := pv.Spec.CSI
		if csi == nil || csi.Driver != CSIDriver || !volumes[csi.VolumeHandle] ||
			!equality.Semantic.DeepEqual(pv.Spec.PersistentVolumeSource, corev1.PersistentVolumeSource{CSI: csi}) {
			return fmt.Errorf("PersistentVolume %q: not a %s volume of a Volume in the archive", pv.Name, CSIDriver)
		}
		pvs[pv.Name] = true
	}
	for _, pvc := range c.PersistentVolumeClaims {
		if errs := validation.IsDNS1123Label(pvc.Namespace); len(errs) > 0 {
			return fmt.Errorf("PersistentVolumeClaim %s/%s: namespace: %s", pvc.Namespace, pvc.Name, strings.Join(errs, "; "))
		}
		if !pvs[pvc.Spec.VolumeName] {
			return fmt.Errorf("PersistentVolumeClaim %s/%s: spec.volumeName %q is not a PersistentVolume in the archive", pvc.Namespace, pvc.Name, pvc.Spec.VolumeName)
		}
	}
	return nil
}

// CSIDriver is the Longhorn CSI driver's name (csi.DriverName), whose
// PersistentVolumes an archive holds.
const CSIDriver = "driver.longhorn.io"

func namesOf[T any](list []T, name func(T) string) []string {
	out := make([]string, 0, len(list))
	for _, o := range list {
		out = append(out, name(o))
	}
	sort.Strings(out)
	return out
}
