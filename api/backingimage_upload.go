package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/backingimage/datasource"
)

// defaultUploadWait bounds how long an upload waits for the data source's
// server of a new image to come up.
const defaultUploadWait = 30 * time.Second

// partReader is the uploaded file part; it remembers how much came
// through and the client's error, so a cut-off body is told apart from a
// failing data source.
type partReader struct {
	part io.Reader
	// deadlines, when set, move on with each read.
	deadlines *uploadDeadlines
	n         atomic.Int64
	readErr   atomic.Value
}

func (p *partReader) Read(b []byte) (int, error) {
	n, err := p.part.Read(b)
	p.n.Add(int64(n))
	if p.deadlines != nil && n > 0 {
		p.deadlines.progress()
	}
	if err != nil && err != io.EOF {
		p.readErr.Store(err)
	}
	return n, err
}

// uploadBackingImage serves POST /v1/backingimages/{name}?action=upload&size=N
// with a multipart/form-data body whose first file part is the image. The
// part is streamed, never held whole, to the upload endpoint of the
// image's data source once its server waits for it; the data source
// checks the size and the checksum, and a body cut off midway or of
// another size leaves it failed with the reason. Progress shows in the
// image's diskFileStatusMap while the bytes flow.
func (s *Server) uploadBackingImage(w http.ResponseWriter, r *http.Request, name string) error {
	rawSize := r.URL.Query().Get("size")
	size, err := strconv.ParseInt(rawSize, 10, 64)
	if rawSize == "" {
		return badRequest("size: query parameter required, the file's size in bytes")
	}
	if err != nil || size <= 0 {
		return badRequest("size: %q must be the file's size in bytes, a positive whole number", rawSize)
	}
	ct := r.Header.Get("Content-Type")
	if mt, params, err := mime.ParseMediaType(ct); err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return &httpError{http.StatusUnsupportedMediaType, "UnsupportedMediaType",
			fmt.Sprintf("Content-Type %q is not supported; send multipart/form-data with the file as a file part (curl -F file=@image.raw)", ct)}
	}
	// The body may take longer than the server's timeouts, as long as
	// it keeps coming.
	deadlines := s.liftUploadDeadlines(w)
	defer deadlines.done(s.bounds().timeouts.WriteTimeout)
	addr, err := s.vm.BackingImageUploadServer(r.Context(), name, s.uploadWait)
	if err != nil {
		return err
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return badRequest("request body: not a multipart/form-data body: %v", err)
	}
	part, err := datasource.FirstFilePart(mr)
	if err != nil {
		return badRequest("request body: %v", err)
	}
	defer part.Close()

	log := s.logger.WithFields(logrus.Fields{"backingImage": name, "size": size, "dataSource": addr})
	log.Info("Streaming an upload to the backing image's data source")
	body := &partReader{part: part, deadlines: deadlines}
	start := time.Now()
	st, err := datasource.NewClient(addr, s.internalTLS).Upload(r.Context(), body, size)
	if err != nil {
		return uploadError(log.WithField("received", body.n.Load()), name, body, err)
	}
	log.WithFields(logrus.Fields{"checksum": st.Checksum, "duration": time.Since(start).Round(time.Millisecond)}).Info("Upload received by the data source")
	bi, err := s.vm.GetBackingImage(name)
	if err != nil {
		return err
	}
	deadlines.done(s.bounds().timeouts.WriteTimeout)
	writeJSON(w, http.StatusOK, toBackingImage(baseURL(r), bi))
	return nil
}

// uploadError turns a failed upload into the answer: the data source's
// refusal with its status, a cut-off client body as 400, anything else as
// a failure to reach the data source.
func uploadError(log *logrus.Entry, name string, body *partReader, err error) error {
	var dsErr *datasource.Error
	if errors.As(err, &dsErr) {
		log.WithError(err).Warn("The data source refused or failed the upload")
		switch dsErr.Status {
		case http.StatusBadRequest:
			return badRequest("upload: %s", dsErr.Message)
		case http.StatusConflict:
			return &httpError{http.StatusConflict, "Conflict", "upload: " + dsErr.Message}
		case http.StatusServiceUnavailable:
			return &httpError{http.StatusServiceUnavailable, "Unavailable", "upload: " + dsErr.Message}
		}
		return &httpError{http.StatusBadGateway, "UploadFailed", fmt.Sprintf("upload to the data source of backing image %s failed: %s", name, dsErr.Message)}
	}
	if cut, ok := body.readErr.Load().(error); ok {
		log.WithError(cut).Warn("The upload was cut off by the client")
		return badRequest("request body: cut off after %d bytes of the file: %v", body.n.Load(), cut)
	}
	log.WithError(err).Warn("The upload could not reach the data source")
	return &httpError{http.StatusBadGateway, "UploadFailed", fmt.Sprintf("upload to the data source of backing image %s failed: %v", name, err)}
}
