package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli"

	"github.com/cadence-storage/longhorn-manager/api"
)

// UICmd serves Longhorn's web UI in front of a manager, as the UI image's
// nginx does: package/longhorn-ui.yaml runs it in the UI's pods, and
// `make ui` in front of `make run`. With --token-file, the UI's requests
// carry the UI's own identity (its ServiceAccount's token) to a manager
// that runs --api-auth=kubernetes.
func UICmd() cli.Command {
	return cli.Command{
		Name:  "ui",
		Usage: "serve a built longhorn-ui (its dist folder) and proxy /v1 to the manager, as Longhorn's UI image does",
		Flags: []cli.Flag{
			cli.StringFlag{Name: "dist", Value: "../shared/longhorn-ui/dist", Usage: "the UI's built dist folder"},
			cli.StringFlag{Name: "listen", Value: "127.0.0.1:8000", Usage: "host:port the UI listens on"},
			cli.StringFlag{Name: "manager-url", Value: "http://127.0.0.1:9500", Usage: "the manager's API (LONGHORN_MANAGER_IP in the UI image)", EnvVar: "LONGHORN_MANAGER_IP"},
			managerCAFlag,
			cli.StringFlag{Name: "token-file", Usage: "a file holding the UI's bearer token (its ServiceAccount's, read again on each request as the kubelet rotates it): every request to the manager carries it in place of the browser's Authorization; none: the browser's passes", EnvVar: "LONGHORN_UI_TOKEN_FILE"},
		},
		Action: func(c *cli.Context) error {
			dist := c.String("dist")
			if _, err := os.Stat(filepath.Join(dist, "index.html")); err != nil {
				return fmt.Errorf("--dist %s: no built UI there (index.html): %v", dist, err)
			}
			manager, err := parseManagerURL(c.String("manager-url"))
			if err != nil {
				return err
			}
			var transport http.RoundTripper
			if tlsCfg := managerTLS(manager, c.String("manager-ca-file")); tlsCfg != nil {
				t := http.DefaultTransport.(*http.Transport).Clone()
				t.TLSClientConfig = tlsCfg
				transport = t
			}
			var token func() string
			if path := c.String("token-file"); path != "" {
				token = tokenFile(path)
				if token() == "" {
					return fmt.Errorf("--token-file %s: no token there (a missing, unreadable or empty file)", path)
				}
			}
			ln, err := net.Listen("tcp", c.String("listen"))
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			srv := &http.Server{Handler: api.UIProxy(dist, manager, token, transport), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-ctx.Done()
				shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(shutdown)
			}()
			logrus.WithFields(logrus.Fields{"listen": ln.Addr().String(), "manager": manager.String(), "identity": token != nil}).Info("Serving Longhorn's UI and proxying /v1 to the manager")
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
}
