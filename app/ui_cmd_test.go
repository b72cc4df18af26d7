package app

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli"
)

// uiContext is the ui command's flags as parsed from args.
func uiContext(t *testing.T, args ...string) *cli.Context {
	t.Helper()
	set := flag.NewFlagSet("ui", flag.ContinueOnError)
	for _, f := range UICmd().Flags {
		f.Apply(set)
	}
	if err := set.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cli.NewContext(cli.NewApp(), set, nil)
}

// The UI's own token is sent only for a user its authenticating proxy
// names: --token-file alone (what the UI's pods ran, when the UI sent
// every browser's request as itself) is refused at start, saying why,
// rather than served with another meaning; the proxy's CA needs the
// token, a readable CA and a serving certificate.
func TestTheUIsTokenIsOnlyForTheAuthenticatingProxysUsers(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("ui-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte(testCAPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		says string
	}{
		{"nothing: the browser's token passes", nil, ""},
		{"a token without a proxy", []string{"--token-file", token}, "never in place of the browser's"},
		{"a proxy without a token", []string{"--requestheader-client-ca-file", ca}, "needs --token-file"},
		{"a CA that is no certificate", []string{"--requestheader-client-ca-file", token, "--token-file", token}, "no PEM certificate"},
		{"a proxy and a token", []string{"--requestheader-client-ca-file", ca, "--token-file", token}, ""},
	} {
		identity, err := uiIdentity(uiContext(t, tc.args...))
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.says)
		case tc.says == "" && (identity != nil) != (len(tc.args) > 0):
			t.Errorf("%s: identity %+v", tc.name, identity)
		}
	}
	if _, err := uiServingTLS(filepath.Join(dir, "tls.crt"), ""); err == nil {
		t.Error("a serving certificate without its key is accepted")
	}
}

// testCAPEM is a self-signed CA certificate (ECDSA P-256, valid until
// 2126).
const testCAPEM = `-----BEGIN CERTIFICATE-----
MIIBYzCCAQmgAwIBAgIBATAKBggqhkjOPQQDAjAYMRYwFAYDVQQDEw10ZXN0LXBy
b3h5LWNhMCAXDTI2MDEwMTAwMDAwMFoYDzIxMjYwMTAxMDAwMDAwWjAYMRYwFAYD
VQQDEw10ZXN0LXByb3h5LWNhMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEAvRP
65xkd1OhAsEcaNRPyGVTKksZ8WB0y/q4B2mquXQ2VZsLNf4Y3ogP0AoFXaZCtF4T
hYFG77/mTr8+nJc6W6NCMEAwDgYDVR0PAQH/BAQDAgIEMA8GA1UdEwEB/wQFMAMB
Af8wHQYDVR0OBBYEFJKcORhbNVLiepIAyyVcB7XimIY/MAoGCCqGSM49BAMCA0gA
MEUCICGK3SaP7W1Cv+cHIsWC+2/dKZkBGTxbavJc4oPAJwcNAiEA13S6gbighnMh
TLP7HqpO7VNex/smR30Tw9tbaudnTKE=
-----END CERTIFICATE-----
`
