// Package datasource is the backing image data source: an HTTP server
// that prepares a backing image's first file in <disk>/tmp/<name>-<uuid>/
// (by download, upload or export from a volume snapshot), reports it on
// GET /v1/file and hands it over to the disk's backing image manager. Its
// Client is what the manager and the controllers use.
package datasource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/internal/panics"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// DefaultStallTimeout is how long a download or upload may go without
// receiving a byte before it fails.
const DefaultStallTimeout = 30 * time.Second

// Config is what a data source prepares and where.
type Config struct {
	// The backing image's name and UUID.
	Name string
	UUID string
	// The disk the file is prepared on, and its UUID as its
	// longhorn-disk.cfg records it.
	DiskPath string
	DiskUUID string

	SourceType longhorn.BackingImageDataSourceType
	Parameters map[string]string
	// The expected SHA512; empty when the user gave none.
	ExpectedChecksum string

	// StallTimeout fails a download or upload that receives nothing for
	// this long; DefaultStallTimeout when zero.
	StallTimeout time.Duration
	// HTTPClient downloads; a client without an overall timeout when nil
	// (the stall timeout bounds a download, however large). The command
	// gives it one that refuses internal addresses (internal/netguard).
	HTTPClient *http.Client
	// MaxDownloadSize, when positive, fails a download larger than this.
	MaxDownloadSize int64
	// Exporter reads volume snapshots for export-from-volume.
	Exporter VolumeExporter
	// QemuImg is the qemu-img binary for qcow2 exports; looked up in PATH
	// when empty.
	QemuImg string
	Log     logrus.FieldLogger
}

// FileStatus is what GET /v1/file answers.
type FileStatus struct {
	Name             string                              `json:"name"`
	UUID             string                              `json:"uuid"`
	DiskUUID         string                              `json:"diskUUID"`
	SourceType       longhorn.BackingImageDataSourceType `json:"sourceType"`
	Parameters       map[string]string                   `json:"parameters"`
	State            longhorn.BackingImageState          `json:"state"`
	Size             int64                               `json:"size"`
	ProcessedSize    int64                               `json:"processedSize"`
	Progress         int                                 `json:"progress"`
	Checksum         string                              `json:"checksum"`
	ExpectedChecksum string                              `json:"expectedChecksum"`
	Message          string                              `json:"message"`
	// The complete file's path relative to the disk, once ready-for-transfer.
	Path string `json:"path"`
	// Whether a manager asked for the file.
	Transferred bool `json:"transferred"`
}

// Server is one data source.
type Server struct {
	cfg    Config
	log    logrus.FieldLogger
	folder string

	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	status      FileStatus
	abortUpload func()
	closed      bool
}

// CancelledMessage is the message of a file whose work was cancelled.
const CancelledMessage = "cancelled by request"

var errCancelled = errors.New(CancelledMessage)

// New checks cfg and returns a server that has not started yet.
func New(cfg Config) (*Server, error) {
	if err := backingimage.ValidateFile(cfg.Name, cfg.UUID, cfg.ExpectedChecksum); err != nil {
		return nil, err
	}
	if cfg.DiskPath == "" || cfg.DiskUUID == "" {
		return nil, errors.New("disk path and disk UUID: both are required")
	}
	if err := backingimage.CheckDisk(cfg.DiskPath, cfg.DiskUUID); err != nil {
		return nil, err
	}
	if err := validateSource(cfg); err != nil {
		return nil, err
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = DefaultStallTimeout
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{}
	}
	if cfg.Log == nil {
		cfg.Log = logrus.StandardLogger()
	}
	log := cfg.Log.WithFields(logrus.Fields{"backingImage": cfg.Name, "uuid": cfg.UUID, "sourceType": cfg.SourceType})
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &Server{
		cfg: cfg, log: log, folder: backingimage.TempFileFolder(cfg.DiskPath, cfg.Name, cfg.UUID),
		ctx: ctx, cancel: cancel,
		status: FileStatus{
			Name: cfg.Name, UUID: cfg.UUID, DiskUUID: cfg.DiskUUID, SourceType: cfg.SourceType,
			Parameters: cfg.Parameters, ExpectedChecksum: cfg.ExpectedChecksum, Size: -1,
			State: longhorn.BackingImageStateStarting,
		},
	}
	if cfg.SourceType == longhorn.BackingImageDataSourceTypeUpload {
		s.status.State = longhorn.BackingImageStatePending
		s.status.Message = "waiting for the upload"
	}
	return s, nil
}

// validateSource checks the source type and its parameters.
func validateSource(cfg Config) error {
	p := cfg.Parameters
	switch cfg.SourceType {
	case longhorn.BackingImageDataSourceTypeDownload:
		raw := p[longhorn.DataSourceParameterURL]
		u, err := url.Parse(raw)
		if raw == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("parameter url %q: must be an http or https URL with a host", raw)
		}
	case longhorn.BackingImageDataSourceTypeUpload:
	case longhorn.BackingImageDataSourceTypeExportFromVolume:
		if p[longhorn.DataSourceParameterVolumeName] == "" {
			return errors.New("parameter volume-name: required for export-from-volume")
		}
		if p[longhorn.DataSourceParameterSnapshotName] == "" {
			return errors.New("parameter snapshot-name: required for export-from-volume (the controller takes the snapshot)")
		}
		switch t := p[longhorn.DataSourceParameterExportType]; t {
		case "", longhorn.ExportTypeRaw, longhorn.ExportTypeQCOW2:
		default:
			return fmt.Errorf("parameter export-type %q: must be raw or qcow2", t)
		}
		if cfg.Exporter == nil {
			return errors.New("export-from-volume: no volume exporter is configured")
		}
	default:
		return fmt.Errorf("source type %q: must be download, upload or export-from-volume", cfg.SourceType)
	}
	return nil
}

// Start prepares the temporary folder and, for download and export,
// starts the work at once; an upload waits for its request.
func (s *Server) Start() error {
	if err := backingimage.CheckDisk(s.cfg.DiskPath, s.cfg.DiskUUID); err != nil {
		s.fail(err)
		return err
	}
	// A folder left by an earlier server holds nothing this one trusts.
	if err := os.RemoveAll(s.folder); err != nil {
		s.fail(err)
		return err
	}
	if err := os.MkdirAll(s.folder, 0o755); err != nil {
		s.fail(err)
		return err
	}
	var work func(context.Context) error
	switch s.cfg.SourceType {
	case longhorn.BackingImageDataSourceTypeDownload:
		work = s.download
	case longhorn.BackingImageDataSourceTypeExportFromVolume:
		work = s.export
	default:
		s.log.Info("Data source waits for the upload")
		return nil
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// A panic in the work fails the file instead of ending the process.
		err := func() (err error) {
			defer panics.Recover(s.log, &err)
			return work(s.ctx)
		}()
		if err != nil {
			s.fail(err)
		}
	}()
	return nil
}

// Close stops any work in progress, waits for it and removes the
// temporary folder: a data source is stopped once a manager took its file
// (or for good), and a new one starts from an empty folder anyway.
func (s *Server) Close() {
	s.cancel(errors.New("server closed"))
	s.mu.Lock()
	s.closed = true
	if s.abortUpload != nil {
		s.abortUpload()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if err := os.RemoveAll(s.folder); err != nil {
		s.log.WithError(err).Warn("Data source could not remove its temporary folder")
	}
}

// Status is the file's current state.
func (s *Server) Status() FileStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	return st
}

// finalPath is where the complete file lands.
func (s *Server) finalPath() string { return filepath.Join(s.folder, backingimage.DataFile) }

// begin marks the work in progress with the file's size (-1 when unknown).
func (s *Server) begin(size int64) {
	s.mu.Lock()
	if s.status.State == longhorn.BackingImageStateFailed {
		s.mu.Unlock()
		return
	}
	s.status.State = longhorn.BackingImageStateInProgress
	s.status.Size = size
	s.status.Message = ""
	s.mu.Unlock()
	s.log.WithField("size", size).Info("Data source started preparing the file")
}

// progress records how much has been prepared; base and span map this
// phase onto the whole (an export to qcow2 has several phases).
func (s *Server) progress(done, total int64, base, span int) {
	s.mu.Lock()
	s.status.ProcessedSize = done
	s.status.Progress = base + backingimage.Percent(done, total)*span/100
	s.mu.Unlock()
}

// setPercent records progress between phases that count no bytes.
func (s *Server) setPercent(p int) {
	s.mu.Lock()
	s.status.Progress = p
	s.mu.Unlock()
}

// ready marks the file complete and verified.
func (s *Server) ready(size int64, checksum string) {
	rel, _ := filepath.Rel(s.cfg.DiskPath, s.finalPath())
	s.mu.Lock()
	if s.status.State == longhorn.BackingImageStateFailed {
		// Cancelled while finishing: failed stays failed.
		s.mu.Unlock()
		return
	}
	s.status.State = longhorn.BackingImageStateReadyForTransfer
	s.status.Size = size
	s.status.ProcessedSize = size
	s.status.Progress = 100
	s.status.Checksum = checksum
	s.status.Path = rel
	s.status.Message = ""
	s.mu.Unlock()
	s.log.WithFields(logrus.Fields{"size": size, "checksum": checksum}).Info("Data source file is ready for transfer")
}

// fail records why the file cannot be prepared; a failed file stays failed.
func (s *Server) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.State == longhorn.BackingImageStateFailed {
		return
	}
	s.status.State = longhorn.BackingImageStateFailed
	s.status.Message = err.Error()
	s.log.WithError(err).Error("Data source failed to prepare the file")
}

// failed says whether the state is failed.
func (s *Server) failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status.State == longhorn.BackingImageStateFailed
}

// Handler serves the data source's HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/file", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, http.StatusOK, s.Status()) })
	mux.HandleFunc("POST /v1/file", s.action)
	mux.HandleFunc("GET /v1/file/content", s.content)
	return mux
}

func (s *Server) action(w http.ResponseWriter, r *http.Request) {
	switch a := r.URL.Query().Get("action"); a {
	case "upload":
		s.upload(w, r)
	case "transfer":
		s.transfer(w)
	case "cancel":
		s.cancelAction(w)
	default:
		writeError(w, http.StatusBadRequest, fmt.Errorf("query parameter action %q: must be upload, transfer or cancel", a))
	}
}

// transfer hands the complete file over: it answers the file's path and
// records that a manager took it.
func (s *Server) transfer(w http.ResponseWriter) {
	s.mu.Lock()
	if s.status.State != longhorn.BackingImageStateReadyForTransfer {
		st := s.status.State
		s.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Errorf("transfer: the file is %s, not ready-for-transfer", st))
		return
	}
	s.status.Transferred = true
	st := s.status
	s.mu.Unlock()
	s.log.Info("Data source handed the file over")
	writeJSON(w, http.StatusOK, st)
}

// content streams the complete file, for a manager on another disk.
func (s *Server) content(w http.ResponseWriter, r *http.Request) {
	st := s.Status()
	if st.State != longhorn.BackingImageStateReadyForTransfer {
		writeError(w, http.StatusConflict, fmt.Errorf("content: the file is %s, not ready-for-transfer", st.State))
		return
	}
	f, err := os.Open(s.finalPath())
	if err != nil {
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	defer f.Close()
	w.Header().Set("X-Checksum", st.Checksum)
	http.ServeContent(w, r, backingimage.DataFile, time.Time{}, f)
}

func (s *Server) cancelAction(w http.ResponseWriter) {
	s.mu.Lock()
	st := s.status.State
	switch st {
	case longhorn.BackingImageStatePending, longhorn.BackingImageStateStarting, longhorn.BackingImageStateInProgress:
	default:
		s.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Errorf("cancel: the file is already %s", st))
		return
	}
	s.status.State = longhorn.BackingImageStateFailed
	s.status.Message = errCancelled.Error()
	abort := s.abortUpload
	s.mu.Unlock()
	s.cancel(errCancelled)
	if abort != nil {
		abort()
	}
	s.log.Info("Data source cancelled by request")
	writeJSON(w, http.StatusOK, s.Status())
}
