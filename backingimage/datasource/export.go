package datasource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// exportReadSize is how much of a snapshot one read asks for: one call of
// the engine each, and a step of the progress.
const exportReadSize = 8 << 20

// VolumeExporter reads volume snapshots for export-from-volume:
// EngineExporter reads them through the volume's engine.
type VolumeExporter interface {
	// OpenSnapshot returns the content of a volume's snapshot as a raw
	// disk image of the volume's size.
	OpenSnapshot(ctx context.Context, volume, snapshot string) (SnapshotReader, error)
}

// SnapshotReader reads one snapshot.
type SnapshotReader interface {
	io.ReaderAt
	io.Closer
	Size() int64
}

// export writes the snapshot as the file: raw as it is, or converted to
// qcow2 by qemu-img.
func (s *Server) export(ctx context.Context) error {
	p := s.cfg.Parameters
	volume, snapshot := p[longhorn.DataSourceParameterVolumeName], p[longhorn.DataSourceParameterSnapshotName]
	qcow2 := p[longhorn.DataSourceParameterExportType] == longhorn.ExportTypeQCOW2
	qemuImg := s.cfg.QemuImg
	if qcow2 && qemuImg == "" {
		var err error
		if qemuImg, err = exec.LookPath("qemu-img"); err != nil {
			return errors.New("export-type qcow2 needs qemu-img (Debian's qemu-utils), which is not installed")
		}
	}
	snap, err := s.cfg.Exporter.OpenSnapshot(ctx, volume, snapshot)
	if err != nil {
		return fmt.Errorf("export snapshot %s of volume %s: %w", snapshot, volume, err)
	}
	defer snap.Close()
	size := snap.Size()
	s.begin(size)
	if !qcow2 {
		sum, err := s.copySnapshot(ctx, snap, s.finalPath(), s.cfg.ExpectedChecksum, 100)
		if err != nil {
			return fmt.Errorf("export snapshot %s of volume %s: %w", snapshot, volume, err)
		}
		s.ready(size, sum)
		return nil
	}

	raw := filepath.Join(s.folder, ".export.raw")
	converted := filepath.Join(s.folder, ".export.qcow2")
	defer os.Remove(raw)
	defer os.Remove(converted)
	if _, err := s.copySnapshot(ctx, snap, raw, "", 80); err != nil {
		return fmt.Errorf("export snapshot %s of volume %s: %w", snapshot, volume, err)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, qemuImg, "convert", "-f", "raw", "-O", "qcow2", raw, converted)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("export snapshot %s of volume %s: qemu-img convert to qcow2: %v: %s", snapshot, volume, err, bytes.TrimSpace(stderr.Bytes()))
	}
	s.setPercent(90)
	sum, qsize, err := backingimage.CommitFile(ctx, converted, s.finalPath(), s.cfg.ExpectedChecksum, nil)
	if err != nil {
		return fmt.Errorf("export snapshot %s of volume %s: %w", snapshot, volume, err)
	}
	s.ready(qsize, sum)
	return nil
}

// copySnapshot writes the whole snapshot to path (checked against
// expected when set); its progress counts for span percent of the whole.
func (s *Server) copySnapshot(ctx context.Context, snap SnapshotReader, path, expected string, span int) (string, error) {
	size := snap.Size()
	part, err := backingimage.CreatePart(path)
	if err != nil {
		return "", err
	}
	defer part.Abort()
	buf := make([]byte, exportReadSize)
	for off := int64(0); off < size; {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		n := int(min(int64(len(buf)), size-off))
		if _, err := snap.ReadAt(buf[:n], off); err != nil && !(err == io.EOF && off+int64(n) == size) {
			return "", fmt.Errorf("read at %d: %w", off, err)
		}
		if _, err := part.Write(buf[:n]); err != nil {
			return "", fmt.Errorf("write %s: %w", path, err)
		}
		off += int64(n)
		s.progress(off, size, 0, span)
	}
	return part.Commit(size, expected)
}
