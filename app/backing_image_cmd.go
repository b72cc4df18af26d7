package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli"

	"github.com/cadence-storage/longhorn-manager/backingimage"
	"github.com/cadence-storage/longhorn-manager/backingimage/datasource"
	"github.com/cadence-storage/longhorn-manager/backingimage/manager"
	"github.com/cadence-storage/longhorn-manager/engine/replica"
	"github.com/cadence-storage/longhorn-manager/engineapi"
	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
	"github.com/cadence-storage/longhorn-manager/mtls"
)

// serverFlags are those of both backing image servers: the disk they
// work on and their internal TLS identity.
var serverFlags = []cli.Flag{
	cli.StringFlag{Name: "disk-path", Usage: "the disk's folder (required)"},
	cli.StringFlag{Name: "disk-uuid", Usage: "the disk's UUID, as its longhorn-disk.cfg records it (required)"},
	cli.StringFlag{Name: "tls-dir", Usage: "folder of the internal TLS identity (ca.crt, tls.crt, tls.key; the manager writes or mounts it; required): only callers with a certificate of the same CA are answered"},
}

// serverIdentity loads --tls-dir, read again when the manager renews it.
func serverIdentity(c *cli.Context, log *logrus.Entry) (*mtls.Identity, error) {
	if err := requireFlags(c, "tls-dir"); err != nil {
		return nil, err
	}
	return mtls.LoadDir(c.String("tls-dir"), log)
}

func requireFlags(c *cli.Context, names ...string) error {
	for _, n := range names {
		if c.String(n) == "" {
			return fmt.Errorf("--%s is required", n)
		}
	}
	return nil
}

// listen opens the server's address; port 0 picks a free one, and the
// address is logged either way so a parent process can read it.
func listen(address string) (net.Listener, error) {
	lis, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", address, err)
	}
	return lis, nil
}

// parseParameters reads repeated --parameter key=value flags.
func parseParameters(raw []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range raw {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--parameter %q: must be key=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// BackingImageDataSourceCmd is `longhorn-manager backing-image-data-source`:
// the server that prepares a backing image's first file.
func BackingImageDataSourceCmd() cli.Command {
	return cli.Command{
		Name:  "backing-image-data-source",
		Usage: "prepare a backing image's first file (download, upload or export) and serve its state",
		Flags: append([]cli.Flag{
			cli.StringFlag{Name: "listen", Value: "127.0.0.1:8001", Usage: "host:port of the HTTP API (a pod uses its IP; port 0 picks one)"},
			cli.StringFlag{Name: "name", Usage: "the backing image's name (required)"},
			cli.StringFlag{Name: "uuid", Usage: "the backing image's UUID (required)"},
			cli.StringFlag{Name: "source-type", Usage: "download, upload or export-from-volume (required)"},
			cli.StringSliceFlag{Name: "parameter", Usage: "a source parameter, key=value (url for download); repeatable"},
			cli.StringFlag{Name: "checksum", Usage: "the expected SHA512; a file that differs fails"},
			cli.DurationFlag{Name: "stall-timeout", Value: datasource.DefaultStallTimeout, Usage: "fail a download or upload that receives nothing for this long"},
			cli.StringFlag{Name: "engine-address", Usage: "host:port of the engine service that runs the volume (required for export-from-volume)"},
			cli.DurationFlag{Name: "engine-timeout", Value: engineapi.DefaultTimeout, Usage: "deadline of each call of the engine (one range of the snapshot)"},
			cli.StringFlag{Name: "download-allowed-ranges", Usage: "IP ranges (CIDR, comma-separated) a download may reach besides public addresses; loopback, link-local, private and shared ranges are refused otherwise, and only a range inside one of them opens it (0.0.0.0/0 opens none); the cloud metadata addresses are never reached", EnvVar: EnvDownloadAllowedRanges},
			cli.StringFlag{Name: "download-denied-ranges", Usage: "more IP ranges (CIDR, comma-separated) a download may not reach, such as public cluster ranges; wins over allowed ranges"},
			cli.StringFlag{Name: "download-node-addresses", Usage: "the cluster's node addresses (comma-separated), refused unless an allowed range names a node alone"},
			cli.Int64Flag{Name: "download-max-size", Usage: "bytes a download may hold at most; 0 for the disk's free space when it starts"},
		}, serverFlags...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("backing-image-data-source takes no arguments, got %q", c.Args())
			}
			if err := requireFlags(c, "name", "uuid", "source-type", "disk-path", "disk-uuid"); err != nil {
				return err
			}
			params, err := parseParameters(c.StringSlice("parameter"))
			if err != nil {
				return err
			}
			log := logrus.WithFields(logrus.Fields{"component": "backing-image-data-source", "backingImage": c.String("name")})
			id, err := serverIdentity(c, log)
			if err != nil {
				return err
			}
			sourceType := longhorn.BackingImageDataSourceType(c.String("source-type"))
			var exporter datasource.VolumeExporter
			if sourceType == longhorn.BackingImageDataSourceTypeExportFromVolume {
				if err := requireFlags(c, "engine-address"); err != nil {
					return fmt.Errorf("%w for export-from-volume", err)
				}
				if _, _, err := net.SplitHostPort(c.String("engine-address")); err != nil {
					return fmt.Errorf("--engine-address %q: must be host:port: %w", c.String("engine-address"), err)
				}
				if c.Duration("engine-timeout") <= 0 {
					return fmt.Errorf("--engine-timeout must be positive, got %s", c.Duration("engine-timeout"))
				}
				exporter = datasource.EngineExporter{Address: c.String("engine-address"), Timeout: c.Duration("engine-timeout"), TLS: id}
			}
			// A download reaches only public addresses and allowed ranges,
			// and holds no more than the disk can.
			guard, err := downloadGuard(c.String("download-allowed-ranges"), c.String("download-denied-ranges"), c.String("download-node-addresses"))
			if err != nil {
				return err
			}
			maxSize := c.Int64("download-max-size")
			if maxSize < 0 {
				return fmt.Errorf("--download-max-size must be 0 or more bytes, got %d", maxSize)
			}
			if maxSize == 0 && sourceType == longhorn.BackingImageDataSourceTypeDownload {
				if maxSize, err = backingimage.FreeBytes(c.String("disk-path")); err != nil {
					return fmt.Errorf("--disk-path %s: free space: %w", c.String("disk-path"), err)
				}
			}
			srv, err := datasource.New(datasource.Config{
				Name: c.String("name"), UUID: c.String("uuid"),
				DiskPath: c.String("disk-path"), DiskUUID: c.String("disk-uuid"),
				SourceType: sourceType, Parameters: params, ExpectedChecksum: c.String("checksum"),
				StallTimeout: c.Duration("stall-timeout"), Exporter: exporter,
				HTTPClient: guard.HTTPClient(), MaxDownloadSize: maxSize,
				Log: log,
			})
			if err != nil {
				return err
			}
			lis, err := listen(c.String("listen"))
			if err != nil {
				return err
			}
			if err := srv.Start(); err != nil {
				lis.Close()
				return err
			}
			defer srv.Close()
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			// Only a caller with a certificate of the cluster CA is answered.
			hs := &http.Server{Handler: mtls.ComponentsOnly(srv.Handler()), ReadHeaderTimeout: 10 * time.Second, TLSConfig: id.ServerConfig()}
			go func() {
				<-ctx.Done()
				shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = hs.Shutdown(shut)
			}()
			log.WithField("address", lis.Addr().String()).Info("Serving the backing image data source")
			if err := hs.ServeTLS(lis, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
}

// BackingImageManagerCmd is `longhorn-manager backing-image-manager`: the
// gRPC service that owns the backing image files of one disk.
func BackingImageManagerCmd() cli.Command {
	return cli.Command{
		Name:  "backing-image-manager",
		Usage: "keep the backing image files of one disk (gRPC)",
		Flags: append([]cli.Flag{
			cli.StringFlag{Name: "listen", Value: "127.0.0.1:8000", Usage: "host:port of the gRPC service (a pod uses its IP; port 0 picks one)"},
			cli.IntFlag{Name: "max-sends", Value: manager.DefaultMaxSends, Usage: "files sent to other managers at once"},
		}, serverFlags...),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("backing-image-manager takes no arguments, got %q", c.Args())
			}
			if err := requireFlags(c, "disk-path", "disk-uuid"); err != nil {
				return err
			}
			if c.Int("max-sends") < 1 {
				return fmt.Errorf("--max-sends must be at least 1, got %d", c.Int("max-sends"))
			}
			log := logrus.WithFields(logrus.Fields{"component": "backing-image-manager", "diskUUID": c.String("disk-uuid")})
			id, err := serverIdentity(c, log)
			if err != nil {
				return err
			}
			disk := c.String("disk-path")
			srv, err := manager.New(manager.Config{
				DiskPath: disk, DiskUUID: c.String("disk-uuid"),
				MaxSends: c.Int("max-sends"), Log: log, TLS: id,
				// A file a replica on this disk starts from is never
				// deleted, whoever asks: the replicas' own records say.
				InUse: func(name, uuid string) ([]string, error) {
					return replica.BackingFileUsers(filepath.Join(disk, replica.ReplicasFolder),
						filepath.Join(backingimage.FileFolder(disk, name, uuid), backingimage.DataFile))
				},
			})
			if err != nil {
				return err
			}
			defer srv.Close()
			lis, err := listen(c.String("listen"))
			if err != nil {
				return err
			}
			g := srv.GRPCServer()
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			go func() {
				<-ctx.Done()
				// Watch streams never end on their own: stop, not drain.
				srv.Close()
				g.Stop()
			}()
			log.WithField("address", lis.Addr().String()).Info("Serving the backing image manager")
			return g.Serve(lis)
		},
	}
}
