package datasource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/internal/netguard"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// errStalled ends a transfer that received nothing for the stall timeout.
type errStalled struct{ timeout time.Duration }

func (e errStalled) Error() string { return fmt.Sprintf("no data received for %s", e.timeout) }

// download fetches the URL into the file. The stall timer runs from the
// start, so a server that accepts the connection and never answers fails
// as surely as one that stops sending halfway.
func (s *Server) download(parent context.Context) error {
	rawURL := s.cfg.Parameters[longhorn.DataSourceParameterURL]
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	timeout := s.cfg.StallTimeout
	stall := time.AfterFunc(timeout, func() { cancel(errStalled{timeout}) })
	defer stall.Stop()

	// cause prefers the reason the context ended (stall, cancel) over the
	// error the transport made of it.
	cause := func(err error) error {
		if c := context.Cause(ctx); c != nil {
			return c
		}
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return fmt.Errorf("download %s: %w", rawURL, err)
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("download %s: %w", rawURL, cause(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download %s: the server answered %s", rawURL, resp.Status)
	}
	size := resp.ContentLength
	var body io.Reader = resp.Body
	if limit := s.cfg.MaxDownloadSize; limit > 0 {
		if size > limit {
			return fmt.Errorf("download %s: the server announces %d bytes, more than the %d a download may hold", rawURL, size, limit)
		}
		body = netguard.LimitReader(resp.Body, limit)
	}
	s.begin(size)
	part, err := backingimage.CreatePart(s.finalPath())
	if err != nil {
		return err
	}
	defer part.Abort()
	buf := make([]byte, 1<<20)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			stall.Reset(timeout)
			if _, err := part.Write(buf[:n]); err != nil {
				return fmt.Errorf("write %s: %w", s.finalPath(), err)
			}
			s.progress(part.Written(), size, 0, 100)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			rerr = cause(rerr)
			if errors.Is(rerr, io.ErrUnexpectedEOF) && size >= 0 {
				return fmt.Errorf("download %s: cut off after %d of %d bytes", rawURL, part.Written(), size)
			}
			return fmt.Errorf("download %s: after %d bytes: %w", rawURL, part.Written(), rerr)
		}
	}
	stall.Stop()
	if err := parent.Err(); err != nil {
		return context.Cause(parent)
	}
	sum, err := part.Commit(size, s.cfg.ExpectedChecksum)
	if err != nil {
		return fmt.Errorf("download %s: %w", rawURL, err)
	}
	s.ready(part.Written(), sum)
	return nil
}
