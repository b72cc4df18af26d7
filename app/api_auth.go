package app

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/api"
)

func checkAPIAuth(mode string) error {
	switch mode {
	case "", api.AuthNone, api.AuthKubernetes:
		return nil
	}
	return fmt.Errorf("--api-auth must be %q or %q, got %q", api.AuthNone, api.AuthKubernetes, mode)
}

// bearerTokenSource returns the bearer token of cfg for the manager's
// calls to its own API under --api-auth=kubernetes: the token file is
// read again on each call, since the kubelet rotates projected tokens.
// It returns nil when cfg carries no token (a client certificate or
// impersonation); those calls then go without one and are refused.
func bearerTokenSource(cfg *rest.Config) func() string {
	switch {
	case cfg.BearerTokenFile != "":
		return tokenFile(cfg.BearerTokenFile)
	case cfg.BearerToken != "":
		token := cfg.BearerToken
		return func() string { return token }
	}
	return nil
}

// tokenFile returns a source of the bearer token in path, read again on
// each call (the kubelet rotates projected tokens in place); an unreadable
// file gives no token, which the API refuses.
func tokenFile(path string) func() string {
	return func() string {
		data, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(data))
	}
}

// apiAllowedHosts are the names the API answers to: --api-allowed-hosts,
// and the host of --manager-url, which the recurring-job pods call.
func apiAllowedHosts(o DaemonOptions) []string {
	hosts := append([]string(nil), o.APIAllowedHosts...)
	if u, err := url.Parse(o.CronJob.ManagerURL); err == nil && u.Hostname() != "" {
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}
