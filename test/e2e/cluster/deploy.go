package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// What a test that deploys onto the node needs of it: where its kubelet
// and containerd are, and images imported beside the test image.

// KubeletRootDir is the kubelet's --root-dir: where it asks CSI drivers
// to mount volumes and where it watches for plugins registering
// (plugins_registry).
func (c *Cluster) KubeletRootDir() string {
	return filepath.Join(c.DataDir, "kubelet", "root")
}

// ContainerdSocket is the node's containerd, whose k8s.io namespace the
// kubelet runs images from.
func (c *Cluster) ContainerdSocket() string {
	return containerdSocket(c.DataDir)
}

// ImportImages imports OCI archives (scripts/build-images.sh's) into the
// node's containerd, where pods with imagePullPolicy IfNotPresent or
// Never find them by the names the archives carry.
func (c *Cluster) ImportImages(ctx context.Context, archives ...string) error {
	for _, archive := range archives {
		if err := importImage(ctx, c.DataDir, archive); err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
	}
	return nil
}

// TagImage gives the image called src in the node's containerd the name
// dst as well ("docker.io/library/longhorn-manager:dev", as containerd
// names an image of no registry): a "new version" of an image for an
// upgrade test, the same bytes under another name.
func (c *Cluster) TagImage(ctx context.Context, src, dst string) error {
	ctr, err := lookPath("ctr")
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, ctr, "--address", containerdSocket(c.DataDir), "--namespace", "k8s.io", "images", "tag", "--force", src, dst)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("tag image %s as %s: %v: %s", src, dst, err, out)
	}
	return nil
}

// SharedFolder makes DataDir/name a mount point of its own with shared
// propagation and returns its path. A hostPath that a container mounts
// with Bidirectional propagation (the manager's disk) must be on a shared
// mount, which this machine's root file system is not (systemd makes it
// one on most machines); Stop unmounts it with everything else under the
// data folder.
func (c *Cluster) SharedFolder(name string) (string, error) {
	dir := filepath.Join(c.DataDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return "", fmt.Errorf("bind mount %s on itself: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return "", fmt.Errorf("make %s a shared mount: %w", dir, err)
	}
	return dir, nil
}
