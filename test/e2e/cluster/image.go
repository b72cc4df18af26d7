package cluster

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Image is the cluster's one local image: testimage (the pod sandbox and
// the tests' commands) on its own, no base. Pods that use it set
// imagePullPolicy: Never or IfNotPresent; nothing is pulled.
const Image = "localhost/longhorn-node-test:v1"

// ImageBinary is the path of the program inside Image.
const ImageBinary = "/testimage"

// buildImage builds testimage static and writes Image as an OCI archive
// (an image layout in one tar) at archive, which `ctr images import`
// reads. It is written here rather than by a tool: one file in one layer
// needs no Docker daemon, buildah or registry.
func buildImage(root, workDir, archive string) error {
	bin := filepath.Join(workDir, "testimage")
	cmd := exec.Command("go", "build", "-o", bin, "./test/e2e/cluster/testimage")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build testimage: %v: %s", err, out)
	}
	program, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	layer, diffID, err := layerTar(program)
	if err != nil {
		return err
	}
	return writeOCIArchive(archive, layer, diffID)
}

// layerTar returns the gzipped layer holding the program at ImageBinary,
// and the digest of its uncompressed tar (the config's diff ID).
func layerTar(program []byte) (gz []byte, diffID string, err error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	hdr := &tar.Header{Name: ImageBinary[1:], Mode: 0o755, Size: int64(len(program)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, "", err
	}
	if _, err := tw.Write(program); err != nil {
		return nil, "", err
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	diffID = digest(raw.Bytes())
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return out.Bytes(), diffID, nil
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int               `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func writeOCIArchive(path string, layer []byte, diffID string) error {
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": []string{ImageBinary},
			"Cmd":        []string{"pause"},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digest(config), Size: len(config)},
		"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: digest(layer), Size: len(layer)}},
	})
	if err != nil {
		return err
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []descriptor{{
			MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: digest(manifest), Size: len(manifest),
			// ctr names the imported image after this annotation.
			Annotations: map[string]string{"io.containerd.image.name": Image, "org.opencontainers.image.ref.name": "v1"},
		}},
	})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(config), config},
		{blobPath(manifest), manifest},
		{blobPath(layer), layer},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, out.Bytes(), 0o644)
}

func digest(data []byte) string {
	return fmt.Sprintf("sha256:%x", sha256.Sum256(data))
}

func blobPath(data []byte) string {
	return fmt.Sprintf("blobs/sha256/%x", sha256.Sum256(data))
}
