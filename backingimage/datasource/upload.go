package datasource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"time"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// upload takes the one multipart upload of the file: POST
// /v1/file?action=upload&size=N with the file as the first file part. A
// request refused before any byte is read (wrong query, not multipart)
// leaves the data source waiting; once data flows, any fault (cut off, a
// size other than N, a wrong checksum) fails it for good.
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if s.cfg.SourceType != longhorn.BackingImageDataSourceTypeUpload {
		writeError(w, http.StatusBadRequest, fmt.Errorf("upload: this data source's sourceType is %s, not upload", s.cfg.SourceType))
		return
	}
	rawSize := r.URL.Query().Get("size")
	size, err := strconv.ParseInt(rawSize, 10, 64)
	if err != nil || size <= 0 {
		writeError(w, http.StatusBadRequest, fmt.Errorf("query parameter size %q: must be the file's size in bytes, a positive integer", rawSize))
		return
	}
	// The upload gets the room it declares, if the disk has it, and not
	// a byte more (receive holds it to size).
	if free, err := backingimage.FreeBytes(s.cfg.DiskPath); err == nil && size > free {
		writeError(w, http.StatusBadRequest, fmt.Errorf("query parameter size %d: the file would not fit, %d bytes are free on the disk", size, free))
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("upload: the body must be multipart/form-data: %v", err))
		return
	}
	rc := http.NewResponseController(w)
	timeout := s.cfg.StallTimeout
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	part, err := FirstFilePart(mr)
	if err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("upload: %v", err))
		return
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, errors.New("upload: the data source is shutting down"))
		return
	}
	if s.status.State != longhorn.BackingImageStatePending {
		st := s.status.State
		s.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Errorf("upload: the file is already %s; a data source takes one upload", st))
		return
	}
	// Cancel and Close end a read blocked on the client.
	s.abortUpload = func() { _ = rc.SetReadDeadline(time.Now()) }
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		s.abortUpload = nil
		s.mu.Unlock()
	}()
	s.begin(size)

	sum, err := s.receive(part, size, func() { _ = rc.SetReadDeadline(time.Now().Add(timeout)) })
	if err != nil {
		s.fail(err)
		code := http.StatusBadRequest
		if errors.Is(err, errCancelled) {
			code = http.StatusConflict
		}
		writeError(w, code, err)
		return
	}
	s.ready(size, sum)
	writeJSON(w, http.StatusOK, s.Status())
}

// receive copies exactly size bytes of the part into the file; extend
// pushes the read deadline on after each read that brought data.
func (s *Server) receive(body io.Reader, size int64, extend func()) (string, error) {
	file, err := backingimage.CreatePart(s.finalPath())
	if err != nil {
		return "", err
	}
	defer file.Abort()
	buf := make([]byte, 1<<20)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			extend()
			if file.Written()+int64(n) > size {
				return "", fmt.Errorf("upload size mismatch: more than the %d bytes the size parameter says", size)
			}
			if _, err := file.Write(buf[:n]); err != nil {
				return "", fmt.Errorf("write %s: %w", s.finalPath(), err)
			}
			s.progress(file.Written(), size, 0, 100)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if s.ctx.Err() != nil {
				return "", context.Cause(s.ctx)
			}
			var ne interface{ Timeout() bool }
			if errors.As(rerr, &ne) && ne.Timeout() {
				return "", fmt.Errorf("upload cut off after %d of %d bytes: %w", file.Written(), size, errStalled{s.cfg.StallTimeout})
			}
			return "", fmt.Errorf("upload cut off after %d of %d bytes: %v", file.Written(), size, rerr)
		}
	}
	if file.Written() != size {
		return "", fmt.Errorf("upload size mismatch: got %d bytes, the size parameter says %d", file.Written(), size)
	}
	sum, err := file.Commit(size, s.cfg.ExpectedChecksum)
	if err != nil {
		return "", fmt.Errorf("upload: %w", err)
	}
	return sum, nil
}

// FirstFilePart skips form fields to the first part that carries a file:
// the upload is that part, as the API and the data source both read it.
func FirstFilePart(mr *multipart.Reader) (*multipart.Part, error) {
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil, errors.New("the multipart body holds no file part")
		}
		if err != nil {
			return nil, fmt.Errorf("read the multipart body: %v", err)
		}
		if p.FileName() != "" {
			return p, nil
		}
		p.Close()
	}
}
