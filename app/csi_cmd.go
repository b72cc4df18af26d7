package app

import (
	"context"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli"

	"github.com/cadence-storage/longhorn-manager/csi"
	"github.com/cadence-storage/longhorn-manager/csi/nodestate"
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
			cli.DurationFlag{Name: "retry-for", Value: 30 * time.Second, Usage: "how long one call retries an unreachable or busy manager"},
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
			})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return d.Serve(ctx, c.String("endpoint"))
		},
	}
}
