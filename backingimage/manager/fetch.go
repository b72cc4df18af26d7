package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/backingimage/datasource"
	"github.com/cadence-storage/longhorn-manager/backingimage/rpc/pb"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// Fetch takes the data source's file, or reuses the file on the disk when
// its checksum matches.
func (s *Server) Fetch(_ context.Context, req *pb.FetchRequest) (*pb.FileInfo, error) {
	if req.Size < 0 {
		return nil, invalid(fmt.Errorf("size %d: must not be negative", req.Size))
	}
	return s.start(req.Name, req.Uuid, req.Checksum, func(ctx context.Context, log logrus.FieldLogger) error {
		if ok, err := s.reuse(ctx, log, req.Name, req.Uuid, req.Checksum); ok || err != nil {
			return err
		}
		if req.DataSourceAddress == "" {
			return errors.New("fetch: no complete file on the disk to reuse, and no data source address given")
		}
		return s.fetchFromDataSource(ctx, log, req)
	})
}

// folder is where a file lives on this disk.
func (s *Server) folder(name, uuid string) string {
	return backingimage.FileFolder(s.cfg.DiskPath, name, uuid)
}

// progressFunc records done of total bytes as the file's progress; base
// and span place this phase in the whole.
func (s *Server) progressFunc(name, uuid string, total int64, base, span int) func(done int64) {
	return func(done int64) {
		p := int32(base + backingimage.Percent(done, total)*span/100)
		s.update(name, uuid, func(i *pb.FileInfo) {
			i.State, i.Progress = string(longhorn.BackingImageStateInProgress), p
		})
	}
}

// markReady records a complete, verified file, and the size of the disk
// it holds, read from its header. A file that is not a disk image volumes
// can use (a qcow2 image with a backing file of its own, encrypted,
// corrupt) is still a ready copy of the image's bytes: its virtual size
// stays 0 and the message says why replicas will refuse it.
func (s *Server) markReady(log logrus.FieldLogger, name, uuid string, size int64, sum, how string) {
	path := filepath.Join(s.folder(name, uuid), backingimage.DataFile)
	rel, _ := filepath.Rel(s.cfg.DiskPath, path)
	virtualSize, err := replica.BackingFileVirtualSize(path)
	if err != nil {
		log.WithError(err).Warn("Backing image file is not a disk image volumes can use")
		how = fmt.Sprintf("%s; volumes cannot use it: %v", how, err)
	}
	s.update(name, uuid, func(i *pb.FileInfo) {
		i.State, i.Progress, i.Size, i.VirtualSize, i.CurrentChecksum, i.Path, i.Message =
			string(longhorn.BackingImageStateReady), 100, size, virtualSize, sum, rel, how
	})
	log.WithFields(logrus.Fields{"size": size, "virtualSize": virtualSize, "checksum": sum}).Info("Backing image file is ready: " + how)
}

// writeMeta is the hook that records a file just before it appears.
func (s *Server) writeMeta(name, uuid string) func(sum string, size int64) error {
	return func(sum string, size int64) error {
		return backingimage.WriteMeta(s.folder(name, uuid), backingimage.Meta{Name: name, UUID: uuid, Size: size, Checksum: sum})
	}
}

// reuse hashes a complete file already in the file's folder. It answers
// true when the file matches the expected checksum (or, with none given,
// the checksum recorded with it) and is ready; a file that does not match
// is removed so the caller can get a good one.
func (s *Server) reuse(ctx context.Context, log logrus.FieldLogger, name, uuid, checksum string) (bool, error) {
	folder := s.folder(name, uuid)
	meta, err := backingimage.ReadMeta(folder)
	if err != nil {
		if err := os.RemoveAll(folder); err != nil {
			return false, err
		}
		return false, nil
	}
	sum, size, err := backingimage.HashFile(ctx, filepath.Join(folder, backingimage.DataFile), s.progressFunc(name, uuid, meta.Size, 0, 100))
	if err != nil {
		return false, fmt.Errorf("verify the file on the disk: %w", err)
	}
	want := checksum
	if want == "" {
		want = meta.Checksum
	}
	if sum != want || size != meta.Size {
		log.WithFields(logrus.Fields{"checksum": sum, "want": want}).Warn("Removing a backing image file whose checksum does not match")
		return false, os.RemoveAll(folder)
	}
	s.markReady(log, name, uuid, size, sum, "reused the file on the disk")
	return true, nil
}

// fetchFromDataSource takes the data source's complete file: by rename
// when it is on this disk, else by streaming it.
func (s *Server) fetchFromDataSource(ctx context.Context, log logrus.FieldLogger, req *pb.FetchRequest) error {
	ds := datasource.NewClient(req.DataSourceAddress, s.cfg.TLS)
	st, err := ds.Get(ctx)
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	if st.Name != req.Name || st.UUID != req.Uuid {
		return fmt.Errorf("fetch: the data source at %s prepares %s (uuid %s), not %s (uuid %s)", req.DataSourceAddress, st.Name, st.UUID, req.Name, req.Uuid)
	}
	if st.State != longhorn.BackingImageStateReadyForTransfer {
		return fmt.Errorf("fetch: the data source's file is %s, not ready-for-transfer: %s", st.State, st.Message)
	}
	want := req.Checksum
	if want != "" && st.Checksum != want {
		return fmt.Errorf("fetch: %w: the data source's file hashes to %s, want %s", backingimage.ErrChecksumMismatch, st.Checksum, want)
	}
	if want == "" {
		want = st.Checksum
	}
	if st, err = ds.Transfer(ctx); err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	final := filepath.Join(s.folder(req.Name, req.Uuid), backingimage.DataFile)
	if st.DiskUUID == s.cfg.DiskUUID {
		src := filepath.Join(s.cfg.DiskPath, st.Path)
		tmpRoot := filepath.Join(s.cfg.DiskPath, backingimage.TempFolder) + string(filepath.Separator)
		if !strings.HasPrefix(src, tmpRoot) {
			return fmt.Errorf("fetch: the data source's file %q is not in the disk's %s folder", st.Path, backingimage.TempFolder)
		}
		sum, size, err := backingimage.CommitFileWith(ctx, src, final, want, s.progressFunc(req.Name, req.Uuid, st.Size, 0, 100), s.writeMeta(req.Name, req.Uuid))
		if err != nil {
			return fmt.Errorf("fetch: %w", err)
		}
		s.markReady(log, req.Name, req.Uuid, size, sum, "taken from the data source")
		return nil
	}
	body, size, err := ds.Content(ctx)
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	defer body.Close()
	sum, err := s.receive(ctx, req.Name, req.Uuid, body, size, want)
	if err != nil {
		return fmt.Errorf("fetch from the data source at %s: %w", req.DataSourceAddress, err)
	}
	s.markReady(log, req.Name, req.Uuid, size, sum, "copied from the data source")
	return nil
}

// receive writes size bytes from r as the file, verified against want.
func (s *Server) receive(ctx context.Context, name, uuid string, r io.Reader, size int64, want string) (string, error) {
	// The sender is not trusted: it gets the room it declared, if the
	// disk has it, and not a byte more.
	if size < 0 {
		return "", fmt.Errorf("the sender declared %d bytes", size)
	}
	if free, err := backingimage.FreeBytes(s.cfg.DiskPath); err == nil && size > free {
		return "", fmt.Errorf("the file holds %d bytes and %d are free on the disk", size, free)
	}
	part, err := backingimage.CreatePart(filepath.Join(s.folder(name, uuid), backingimage.DataFile))
	if err != nil {
		return "", err
	}
	defer part.Abort()
	progress := s.progressFunc(name, uuid, size, 0, 100)
	buf := make([]byte, 1<<20)
	for {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		n, rerr := r.Read(buf)
		if part.Written()+int64(n) > size {
			return "", fmt.Errorf("the sender sent more than the %d bytes it declared", size)
		}
		if n > 0 {
			if _, err := part.Write(buf[:n]); err != nil {
				return "", err
			}
			progress(part.Written())
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", fmt.Errorf("cut off after %d of %d bytes: %w", part.Written(), size, rerr)
		}
	}
	meta := s.writeMeta(name, uuid)
	return part.CommitWith(size, want, func(sum string) error { return meta(sum, part.Written()) })
}
