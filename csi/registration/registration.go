package registration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/cadence-storage/longhorn-manager/csi"
)

// SupportedVersions are the CSI versions the driver speaks, as GetInfo
// tells the kubelet (which takes any 1.x).
var SupportedVersions = []string{"1.0.0"}

// Defaults of Options.
const (
	DefaultRetryAfter    = 5 * time.Second
	DefaultProbeInterval = time.Second
	DefaultKubeletWait   = 2 * time.Minute
	DefaultCheckInterval = 10 * time.Second
	// maxRetryAfter caps the doubling wait between offers the kubelet
	// refused.
	maxRetryAfter = 5 * time.Minute
	// probeTimeout bounds one Probe of the CSI socket while waiting for it.
	probeTimeout = 5 * time.Second
	// probeLogEvery is how many unanswered Probes pass between two log
	// lines while waiting, so that a driver that never answers is seen
	// without a line a second.
	probeLogEvery = 30
)

// Options configure a Registrar.
type Options struct {
	// CSIEndpoint is the driver's own socket, unix:///path/csi.sock, as
	// this process serves it: it must answer a Probe before the
	// registration is offered.
	CSIEndpoint string
	// KubeletEndpoint is the path of the same socket as the kubelet sees
	// it on the host (node-driver-registrar's --kubelet-registration-path):
	// the kubelet dials it, as a path, to call the Node service.
	KubeletEndpoint string
	// Dir is the kubelet's plugin registration directory
	// (/var/lib/kubelet/plugins_registry on the host) as this process sees
	// it.
	Dir string
	// RetryAfter is the first wait before a registration the kubelet
	// refused is offered again; each refusal doubles it, up to 5 minutes.
	RetryAfter time.Duration
	// ProbeInterval is the wait between two Probes of a CSI socket that
	// does not answer yet.
	ProbeInterval time.Duration
	// KubeletWait is how long an offered registration may go unasked
	// before a warning says so (the kubelet watches another directory, or
	// none).
	KubeletWait time.Duration
	// CheckInterval is how often the registration socket is checked to
	// be still there: one removed by someone else (a cleanup of the
	// kubelet's directory) is made anew, or the kubelet would never call
	// the Node service again.
	CheckInterval time.Duration
	// Log is where the registration logs.
	Log *logrus.Entry
}

// Registrar offers the kubelet the registration of csi.DriverName.
type Registrar struct {
	opts Options
	log  *logrus.Entry
}

// New checks opts and fills in the defaults.
func New(opts Options) (*Registrar, error) {
	if opts.CSIEndpoint == "" {
		return nil, errors.New("registration: no CSI endpoint to probe")
	}
	if strings.Contains(opts.KubeletEndpoint, "://") || !filepath.IsAbs(opts.KubeletEndpoint) {
		return nil, fmt.Errorf("kubelet registration path %q: must be the CSI socket's absolute path on the host, such as /var/lib/kubelet/plugins/%s/csi.sock (the kubelet dials it as a path)", opts.KubeletEndpoint, csi.DriverName)
	}
	if opts.Dir == "" {
		return nil, errors.New("registration: no plugin registration directory")
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = DefaultRetryAfter
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = DefaultProbeInterval
	}
	if opts.KubeletWait <= 0 {
		opts.KubeletWait = DefaultKubeletWait
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.Log == nil {
		opts.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	log := opts.Log.WithFields(logrus.Fields{"component": "csi-registration", "driver": csi.DriverName})
	return &Registrar{opts: opts, log: log}, nil
}

// SocketPath is the registration socket the kubelet's plugin watcher
// finds: <dir>/<driver>-reg.sock, as the kubelet's plugin watcher asks
// (a name of the plugin's own, not starting with a dot).
func (r *Registrar) SocketPath() string {
	return filepath.Join(r.opts.Dir, csi.DriverName+"-reg.sock")
}

// Run waits for the CSI socket to answer, then offers the registration
// until ctx ends, offering it again after each refusal. It returns nil
// once ctx ends, the socket removed, and an error when it cannot offer
// the registration at all.
func (r *Registrar) Run(ctx context.Context) error {
	if err := r.waitForDriver(ctx); err != nil {
		return nil // ctx ended
	}
	wait := r.opts.RetryAfter
	for {
		end, refusal, err := r.offer(ctx)
		switch {
		case err != nil:
			return err
		case end == stopped:
			return nil
		case end == removed:
			continue // offered again at once
		}
		r.log.WithFields(logrus.Fields{"reason": refusal, "retryAfter": wait.String()}).
			Error("The kubelet refused to register the CSI driver: its Node service is unknown to the kubelet until it does; the registration socket is withdrawn and offered again")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, maxRetryAfter)
	}
}

// waitForDriver returns once the CSI socket answers a Probe, ready or
// not: the kubelet needs the Node service registered to unmount and
// unstage volumes even while the manager's API is away (the Probe's
// "not ready"), so only a socket that does not answer holds the
// registration back.
func (r *Registrar) waitForDriver(ctx context.Context) error {
	log := r.log.WithField("endpoint", r.opts.CSIEndpoint)
	for attempt := 0; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		ready, err := csi.ProbeSocket(pctx, r.opts.CSIEndpoint)
		cancel()
		if err == nil {
			if !ready {
				log.Warn("The CSI socket answers but the driver is not ready (it cannot reach the manager's API): registering it with the kubelet all the same, so that volumes can still be unmounted")
			}
			return nil
		}
		if attempt%probeLogEvery == 0 {
			log.WithError(err).Info("Waiting for the CSI socket to answer a Probe before registering the driver with the kubelet")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(r.opts.ProbeInterval):
		}
	}
}

// offerEnd is why an offer ended.
type offerEnd int

const (
	stopped offerEnd = iota // ctx ended
	refused                 // the kubelet refused the registration
	removed                 // the socket was removed by someone else
)

// offer serves the registration socket until ctx ends, the kubelet
// refuses the registration (with the kubelet's reason) or the socket is
// removed under it; the socket it made is removed then, if it is still
// there.
func (r *Registrar) offer(ctx context.Context) (end offerEnd, refusal string, err error) {
	path := r.SocketPath()
	if fi, err := os.Stat(r.opts.Dir); err != nil || !fi.IsDir() {
		return 0, "", fmt.Errorf("the plugin registration directory %s is not a directory (is the kubelet's plugins_registry mounted there?): %v", r.opts.Dir, err)
	}
	// A socket left by a process that stopped is ours to replace; making
	// it anew is also what tells the kubelet to register again.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, "", fmt.Errorf("remove the stale registration socket %s: %w", path, err)
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return 0, "", fmt.Errorf("listen on the registration socket %s: %w", path, err)
	}
	// Closing the listener would remove whatever is at path then; the
	// deferred removal below removes only this offer's socket.
	l.SetUnlinkOnClose(false)
	// As node-driver-registrar's: for its owner, root, alone (the kubelet).
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return 0, "", fmt.Errorf("restrict the registration socket %s to its owner: %w", path, err)
	}
	made, err := os.Stat(path)
	if err != nil {
		l.Close()
		return 0, "", fmt.Errorf("stat the registration socket %s: %w", path, err)
	}
	s := &registrationServer{r: r, asked: make(chan struct{}, 1), refused: make(chan string, 1)}
	srv := grpc.NewServer()
	registerapi.RegisterRegistrationServer(srv, s)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	defer func() {
		srv.GracefulStop()
		// Only the socket this offer made: one made since by someone else
		// (another instance) is theirs.
		if fi, statErr := os.Stat(path); statErr != nil || !os.SameFile(fi, made) {
			return
		}
		if rmErr := os.Remove(path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) && err == nil {
			err = fmt.Errorf("remove the registration socket %s: %w", path, rmErr)
		}
	}()

	log := r.log.WithFields(logrus.Fields{"socket": path, "endpoint": r.opts.KubeletEndpoint})
	log.Info("Offering the kubelet the registration of the CSI driver")
	unasked := time.NewTimer(r.opts.KubeletWait)
	defer unasked.Stop()
	check := time.NewTicker(r.opts.CheckInterval)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Info("Withdrawing the CSI driver's registration: the process stops")
			return stopped, "", nil
		case refusal := <-s.refused:
			return refused, refusal, nil
		case err := <-served:
			return 0, "", fmt.Errorf("serve the registration socket %s: %w", path, err)
		case <-check.C:
			fi, err := os.Stat(path)
			switch {
			case errors.Is(err, os.ErrNotExist):
				log.Warn("The registration socket was removed by someone else: the kubelet deregisters the CSI driver; offering the registration again")
				return removed, "", nil
			case err == nil && !os.SameFile(fi, made):
				// Another process (a second instance of the driver) made
				// it anew: making ours again would only take turns.
				log.Error("The registration socket was made anew by another process: it is left to it, and the kubelet talks to that process")
				check.Stop()
			}
		case <-s.asked:
			unasked.Stop()
		case <-unasked.C:
			log.WithField("waited", r.opts.KubeletWait.String()).
				Warn("The kubelet has not asked for the CSI driver's registration: is the registration directory the kubelet's plugins_registry, and the registration path the CSI socket's path on the host?")
		}
	}
}

// registrationServer answers the kubelet on the registration socket.
type registrationServer struct {
	registerapi.UnimplementedRegistrationServer
	r       *Registrar
	asked   chan struct{}
	refused chan string
}

func (s *registrationServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	select {
	case s.asked <- struct{}{}:
	default:
	}
	s.r.log.WithField("endpoint", s.r.opts.KubeletEndpoint).Info("The kubelet asked for the CSI driver's registration")
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              csi.DriverName,
		Endpoint:          s.r.opts.KubeletEndpoint,
		SupportedVersions: SupportedVersions,
	}, nil
}

func (s *registrationServer) NotifyRegistrationStatus(_ context.Context, status *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if status.PluginRegistered {
		s.r.log.WithField("endpoint", s.r.opts.KubeletEndpoint).Info("The kubelet registered the CSI driver")
		return &registerapi.RegistrationStatusResponse{}, nil
	}
	reason := status.Error
	if reason == "" {
		reason = "the kubelet gave no reason"
	}
	select {
	case s.refused <- reason:
	default: // one refusal withdraws the socket; later ones say no more
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
