package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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
// `make ui` in front of `make run`. The browser's own Authorization passes
// through. With --requestheader-client-ca-file the UI also believes the
// identity headers of the cluster's authenticating proxy, from a client
// with that CA's certificate only, and passes the user on to the manager
// as the UI's account (--token-file) impersonating them (see
// api.UIIdentity).
func UICmd() cli.Command {
	return cli.Command{
		Name:  "ui",
		Usage: "serve a built longhorn-ui (its dist folder) and proxy /v1 to the manager, as Longhorn's UI image does",
		Flags: []cli.Flag{
			cli.StringFlag{Name: "dist", Value: "../shared/longhorn-ui/dist", Usage: "the UI's built dist folder"},
			cli.StringFlag{Name: "listen", Value: "127.0.0.1:8000", Usage: "host:port the UI listens on"},
			cli.StringFlag{Name: "manager-url", Value: "http://127.0.0.1:9500", Usage: "the manager's API (LONGHORN_MANAGER_IP in the UI image)", EnvVar: "LONGHORN_MANAGER_IP"},
			managerCAFlag,
			cli.StringFlag{Name: "token-file", Usage: "a file holding the UI's bearer token (its ServiceAccount's, read again on each request as the kubelet rotates it), sent only with the impersonation headers of a user the authenticating proxy named; needs --requestheader-client-ca-file", EnvVar: "LONGHORN_UI_TOKEN_FILE"},
			cli.StringFlag{Name: "requestheader-client-ca-file", Usage: "believe the identity headers only from a client (the cluster's authenticating proxy) with a client certificate this CA signed; needs --tls-cert-file and --tls-private-key-file", EnvVar: "LONGHORN_UI_REQUESTHEADER_CLIENT_CA_FILE"},
			cli.StringSliceFlag{Name: "requestheader-allowed-names", Usage: "common names the authenticating proxy's client certificate may have (none: any the CA signed)", EnvVar: "LONGHORN_UI_REQUESTHEADER_ALLOWED_NAMES"},
			cli.StringSliceFlag{Name: "requestheader-username-headers", Usage: "headers naming the user, the first one set wins (default X-Remote-User)", EnvVar: "LONGHORN_UI_REQUESTHEADER_USERNAME_HEADERS"},
			cli.StringSliceFlag{Name: "requestheader-group-headers", Usage: "headers naming the user's groups (default X-Remote-Group)", EnvVar: "LONGHORN_UI_REQUESTHEADER_GROUP_HEADERS"},
			cli.StringFlag{Name: "tls-cert-file", Usage: "serve HTTPS with this certificate (PEM, chain included)", EnvVar: "LONGHORN_UI_TLS_CERT_FILE"},
			cli.StringFlag{Name: "tls-private-key-file", Usage: "the key of --tls-cert-file", EnvVar: "LONGHORN_UI_TLS_PRIVATE_KEY_FILE"},
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
			identity, err := uiIdentity(c)
			if err != nil {
				return err
			}
			tlsCfg, err := uiServingTLS(c.String("tls-cert-file"), c.String("tls-private-key-file"))
			if err != nil {
				return err
			}
			if identity != nil && tlsCfg == nil {
				return fmt.Errorf("--requestheader-client-ca-file needs --tls-cert-file and --tls-private-key-file: the proxy's client certificate is only seen over TLS")
			}
			ln, err := net.Listen("tcp", c.String("listen"))
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			if tlsCfg != nil {
				ln = tls.NewListener(ln, tlsCfg)
			}
			srv := &http.Server{Handler: api.UIProxy(dist, manager, identity, transport), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-ctx.Done()
				shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(shutdown)
			}()
			logrus.WithFields(logrus.Fields{"listen": ln.Addr().String(), "manager": manager.String(), "tls": tlsCfg != nil, "identityHeaders": identity != nil}).Info("Serving Longhorn's UI and proxying /v1 to the manager")
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
}

// uiIdentity is the UI's trust in an authenticating proxy, from its
// flags; nil when --requestheader-client-ca-file is not set. The UI's own
// token is sent only with a user the proxy named, so --token-file without
// a proxy to believe is refused: it no longer stands in for the browser's
// Authorization, and a deployment that still expects it to must not start
// as if it did.
func uiIdentity(c *cli.Context) (*api.UIIdentity, error) {
	caFile, path := c.String("requestheader-client-ca-file"), c.String("token-file")
	if caFile == "" {
		if path != "" {
			return nil, fmt.Errorf("--token-file %s: the UI sends its own token only for a user its authenticating proxy names (--requestheader-client-ca-file), never in place of the browser's; set both, or neither (docs/api.md, \"Longhorn's web UI\")", path)
		}
		return nil, nil
	}
	data, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--requestheader-client-ca-file: %v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--requestheader-client-ca-file %s: no PEM certificate there", caFile)
	}
	if path == "" {
		return nil, fmt.Errorf("--requestheader-client-ca-file needs --token-file: the UI passes a user on as its own account impersonating them")
	}
	token := tokenFile(path)
	if token() == "" {
		return nil, fmt.Errorf("--token-file %s: no token there (a missing, unreadable or empty file)", path)
	}
	return &api.UIIdentity{ClientCA: pool, AllowedNames: splitList(c.StringSlice("requestheader-allowed-names")),
		UserHeaders: splitList(c.StringSlice("requestheader-username-headers")), GroupHeaders: splitList(c.StringSlice("requestheader-group-headers")),
		Token: token}, nil
}

// uiServingTLS is the UI's HTTPS configuration, nil without a
// certificate. It asks the client for a certificate but does not require
// one: browsers reached through port-forward have none, and
// api.UIIdentity checks the proxy's itself.
func uiServingTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("--tls-cert-file and --tls-private-key-file go together")
	}
	// Read again on each handshake, so a renewed certificate (a Secret
	// cert-manager rotates) is served without a restart.
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		return nil, fmt.Errorf("--tls-cert-file/--tls-private-key-file: %v", err)
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			return &cert, err
		}}, nil
}
