package app

import (
	"context"
	"errors"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli"
	"golang.org/x/sync/errgroup"

	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/csi/liveness"
	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
	"github.com/cadence-storage/longhorn-manager/csi/registration"
)

// CSICmd is `longhorn-manager csi`: the CSI driver, driver.longhorn.io,
// serving the Controller service (beside the sidecars), the Node service
// (on each node, for the kubelet), or both.
func CSICmd() cli.Command {
	return cli.Command{
		Name:  "csi",
		Usage: "serve the CSI driver " + csi.DriverName,
		Flags: []cli.Flag{
			cli.StringFlag{Name: "endpoint", Value: "unix:///csi/csi.sock", Usage: "the socket the sidecars and the kubelet call", EnvVar: "CSI_ENDPOINT"},
			cli.StringFlag{Name: "node-id", Usage: "serve the Node service as this Longhorn node", EnvVar: "NODE_NAME"},
			cli.BoolFlag{Name: "controller", Usage: "serve the Controller service"},
			cli.StringFlag{Name: "manager-url", Value: "http://longhorn-backend:9500/v1", Usage: "the manager API"},
			managerCAFlag,
			cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig whose token is sent to a manager with --api-auth=kubernetes; the in-cluster config when empty, none outside a cluster", EnvVar: "KUBECONFIG"},
			cli.StringFlag{Name: "api-token-file", Usage: "the token sent to a manager with --api-auth=kubernetes, projected for its --api-token-audience (read again on each call); the kubeconfig's when empty", EnvVar: "API_TOKEN_FILE"},
			cli.StringFlag{Name: "state-dir", Value: nodestate.DefaultDir, Usage: "where the Node service keeps what it made for each staged volume"},
			cli.StringFlag{Name: "instance-manager-dir", Usage: "the node's instance manager's folder (the daemon's <data-dir>/instance-manager, as this container mounts it): the Node service calls its socket to have the staged volumes' devices (nbdfuse, loop devices) made and kept there, so that they outlive this process and container; empty, the driver makes them itself, in --state-dir", EnvVar: "INSTANCE_MANAGER_DIR"},
			cli.DurationFlag{Name: "retry-for", Value: 30 * time.Second, Usage: "how long one call retries an unreachable or busy manager"},
			cli.StringFlag{Name: "kubelet-registration-path", Usage: "register the Node service with the kubelet's plugin watcher, as node-driver-registrar does, telling it the CSI socket is at this path on the host (--endpoint as the kubelet sees it); off when empty"},
			cli.StringFlag{Name: "plugin-registration-dir", Value: "/registration", Usage: "the kubelet's plugin registration directory (/var/lib/kubelet/plugins_registry on the host) as this container mounts it, where the registration socket is made"},
			cli.StringFlag{Name: "health-address", Usage: "serve /healthz, the driver's Probe over its own socket, as the livenessprobe sidecar does, on this host:port; off when empty"},
			cli.DurationFlag{Name: "health-probe-timeout", Value: liveness.DefaultProbeTimeout, Usage: "how long /healthz waits for the Probe; below the kubelet probe's timeout"},
		},
		Action: func(c *cli.Context) error {
			api, err := newAPIClient(c.String("manager-url"), c.Duration("retry-for"), c.String("manager-ca-file"))
			if err != nil {
				return err
			}
			if cfg, err := restConfig(c.String("kubeconfig")); err == nil {
				api.Token = bearerTokenSource(cfg)
			}
			if path := c.String("api-token-file"); path != "" {
				api.Token = tokenFile(path)
			}
			d, err := csi.NewDriver(api, csi.Options{
				NodeID: c.String("node-id"), Controller: c.Bool("controller"), Version: c.App.Version, StateDir: c.String("state-dir"),
				InstanceManagerDir: c.String("instance-manager-dir"),
			})
			if err != nil {
				return err
			}
			endpoint := c.String("endpoint")
			var registrar *registration.Registrar
			if path := c.String("kubelet-registration-path"); path != "" {
				if c.String("node-id") == "" {
					return errors.New("--kubelet-registration-path registers the Node service with the kubelet: give the driver a --node-id")
				}
				registrar, err = registration.New(registration.Options{CSIEndpoint: endpoint, KubeletEndpoint: path, Dir: c.String("plugin-registration-dir")})
				if err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return serveCSI(ctx, d, endpoint, registrar, c.String("health-address"), c.Duration("health-probe-timeout"))
		},
	}
}

// serveCSI serves the driver on endpoint and, beside it, the kubelet's
// registration and the liveness endpoint when asked, until ctx ends or
// one of them fails (which stops the others).
func serveCSI(ctx context.Context, d *csi.Driver, endpoint string, registrar *registration.Registrar, healthAddr string, probeTimeout time.Duration) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		err := d.Serve(ctx, endpoint)
		if err == nil && ctx.Err() == nil {
			err = errors.New("the CSI server stopped")
		}
		return err
	})
	if registrar != nil {
		g.Go(func() error { return registrar.Run(ctx) })
	}
	if healthAddr != "" {
		g.Go(func() error {
			return liveness.Serve(ctx, healthAddr, &liveness.Handler{Endpoint: endpoint, ProbeTimeout: probeTimeout})
		})
	}
	return g.Wait()
}
