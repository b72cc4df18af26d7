//go:build e2e

package volume

import (
	"net/url"
	"testing"

	"github.com/cadence-storage/longhorn-manager/app"
	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// TestNBDFrontendsListenOnLoopbackByDefault: the engine service may
// listen on the pod's address, but a volume's NBD frontend, which serves
// its data with no authentication, listens on 127.0.0.1 unless
// --frontend-address says otherwise (reach it with kubectl port-forward).
// The engine here listens on 127.0.0.2, another loopback address, so the
// two are told apart on one machine.
func TestNBDFrontendsListenOnLoopbackByDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, frontend, wantHost string
	}{
		{"default", "", "127.0.0.1"},
		{"--frontend-address", "127.0.0.3", "127.0.0.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := framework.NewAPIEnv(t, func(o *app.DaemonOptions) {
				o.EngineAddress = "127.0.0.2:0"
				o.FrontendAddress = tc.frontend
			})
			e.Call(t, "POST", "/v1/volumes", `{"name":"vol","size":"4Mi","numberOfReplicas":1}`).Expect(t, 200)
			e.Call(t, "POST", "/v1/volumes/vol?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
			v := e.WaitVolume(t, "vol", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
			u, err := url.Parse(v["endpoint"].(string))
			if err != nil {
				t.Fatal(err)
			}
			if u.Hostname() != tc.wantHost {
				t.Fatalf("the frontend listens on %s, want %s", v["endpoint"], tc.wantHost)
			}
			framework.QemuIO(t, v["endpoint"].(string), "write -P 0x44 0 4k", "read -P 0x44 0 4k")
		})
	}
}
