package app

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/urfave/cli"

	"github.com/cadence-storage/longhorn-manager/client"
	"github.com/cadence-storage/longhorn-manager/mtls"
	"github.com/cadence-storage/longhorn-manager/types"
)

// managerCAFlag is the CA bundle that checks an https:// --manager-url.
var managerCAFlag = cli.StringFlag{Name: "manager-ca-file", Value: types.ManagerCAPath,
	Usage: "the internal CA's certificates (the ConfigMap " + mtls.CAConfigMapName + ") that check the API's certificate when --manager-url is https://"}

// parseManagerURL reads --manager-url: an http:// or https:// URL.
func parseManagerURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--manager-url %q: must be an http:// or https:// URL of the manager's API, such as http://127.0.0.1:9500", raw)
	}
	return u, nil
}

// managerTLS is the TLS that reaches the manager at u: nil for http://;
// for https://, a check of the API's certificate with the CA bundle in
// caFile, read at each connection. A file not there yet is logged: the
// pod of the first manager starts before the managers publish it, and
// the calls fail, naming the file, until it appears.
func managerTLS(u *url.URL, caFile string) *tls.Config {
	if u.Scheme != "https" {
		return nil
	}
	if _, err := os.Stat(caFile); err != nil {
		logrus.WithError(err).WithFields(logrus.Fields{"managerURL": u.String(), "caFile": caFile}).Warn(
			"The internal CA's certificates that check the manager's API (--manager-ca-file) cannot be read yet: calls fail until they can")
	}
	return mtls.APIClientConfig(caFile)
}

// newAPIClient is a client of the manager API at managerURL (see
// managerTLS).
func newAPIClient(managerURL string, retryFor time.Duration, caFile string) (*client.Client, error) {
	u, err := parseManagerURL(managerURL)
	if err != nil {
		return nil, err
	}
	api := client.NewClient(managerURL, retryFor)
	if cfg := managerTLS(u, caFile); cfg != nil {
		api.SetTLS(cfg)
	}
	return api, nil
}
