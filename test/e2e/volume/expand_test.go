//go:build e2e

package volume

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cadence-storage/longhorn-manager/test/e2e/framework"
)

// The expand action, online and offline: an attached volume grows while
// its data is served (the old data reads back, the new space is zeros and
// takes writes), a detached one grows when it next attaches; the Replica
// objects record the new size; bad sizes are refused naming size.
func TestVolumeExpandAction(t *testing.T) {
	t.Parallel()
	e := framework.NewAPIEnv(t)
	e.Call(t, "POST", "/v1/volumes", `{"name":"grow","size":"16Mi","numberOfReplicas":2}`).Expect(t, 200)
	v := e.WaitVolume(t, "grow", "detached with its objects", func(v map[string]any) bool { return v["state"] == "detached" })
	if _, ok := v["actions"].(map[string]any)["expand"]; !ok {
		t.Errorf("a volume does not offer expand: %v", v["actions"])
	}
	e.Call(t, "POST", "/v1/volumes/grow?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v = e.WaitVolume(t, "grow", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	endpoint := v["endpoint"].(string)
	framework.QemuIO(t, endpoint, "write -P 0xab 0 16M", "flush")

	// Bad input, refused naming the field; nothing changes.
	e.Call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"8Mi"}`).Expect(t, 400, "size", "never shrinks")
	e.Call(t, "POST", "/v1/volumes/grow?action=expand", `{}`).Expect(t, 400, "size: required")
	e.Call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"lots"}`).Expect(t, 400, "size")
	e.Call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"`+strconv.Itoa(1<<60)+`"}`).Expect(t, 400, "InsufficientCapacity", "size")
	e.Call(t, "POST", "/v1/volumes/nope?action=expand", `{"size":"32Mi"}`).Expect(t, 404)
	e.Call(t, "POST", "/v1/volumes/grow?action=cancelExpansion", `{}`).Expect(t, 422, "cancelExpansion")

	// Online: 16 MiB to 32 MiB (31 MiB + 1 byte rounds up to 32 MiB).
	grown := e.Call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"`+strconv.Itoa(31<<20+1)+`"}`).Expect(t, 200)
	if grown.Body["size"] != strconv.Itoa(32<<20) {
		t.Fatalf("expanded volume's size %v, want %d (rounded up to 2 MiB)", grown.Body["size"], 32<<20)
	}
	e.WaitVolume(t, "grow", "the engine at 32 MiB", func(v map[string]any) bool { return framework.ActualSize(v) == strconv.Itoa(32<<20) })
	e.Call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"32Mi"}`).Expect(t, 200) // the same size again
	framework.QemuIO(t, endpoint, "write -P 0xcd 31M 1M", "flush")
	data := framework.DeviceContent(t, endpoint)
	want := append(append(bytes.Repeat([]byte{0xab}, 16<<20), make([]byte, 15<<20)...), bytes.Repeat([]byte{0xcd}, 1<<20)...)
	if !bytes.Equal(data, want) {
		t.Fatalf("after growing online: %d bytes, not the old data, zeros and the new write", len(data))
	}
	framework.Eventually(t, 20*time.Second, "replicas record 32 MiB", func() (bool, error) {
		list, err := e.LH.LonghornV1beta2().Replicas(e.NS).List(context.Background(), metav1.ListOptions{})
		if err != nil || len(list.Items) != 2 {
			return false, err
		}
		for _, r := range list.Items {
			if r.Spec.VolumeSize != 32<<20 {
				return false, nil
			}
		}
		return true, nil
	})

	// Offline: detached, grown to 48 MiB; the engine grows at the attach.
	e.Call(t, "POST", "/v1/volumes/grow?action=detach", "").Expect(t, 200)
	e.WaitVolume(t, "grow", "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.Call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"48Mi"}`).Expect(t, 200)
	e.Call(t, "POST", "/v1/volumes/grow?action=attach", `{"hostId":"node-1"}`).Expect(t, 200)
	v = e.WaitVolume(t, "grow", "attached at 48 MiB", func(v map[string]any) bool {
		return v["state"] == "attached" && framework.ActualSize(v) == strconv.Itoa(48<<20)
	})
	data = framework.DeviceContent(t, v["endpoint"].(string))
	want = append(want, make([]byte, 16<<20)...)
	if !bytes.Equal(data, want) {
		t.Fatalf("after growing offline: %d bytes, not the data then zeros", len(data))
	}
	if out := framework.QemuIO(t, v["endpoint"].(string), "read -P 0 32M 16M"); !strings.Contains(out, "read") {
		t.Fatalf("qemu-io: %s", out)
	}

	// spec.size written with kubectl past the disk's room: the apiserver
	// takes it (a CEL rule refuses only shrinking), the controller does
	// not grow the volume and says why; the volume serves at its size.
	vol, err := e.LH.LonghornV1beta2().Volumes(e.NS).Get(context.Background(), "grow", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vol.Spec.Size = 1 << 60
	if _, err := e.LH.LonghornV1beta2().Volumes(e.NS).Update(context.Background(), vol, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	v = e.WaitVolume(t, "grow", "the growth refused", func(v map[string]any) bool {
		c, _ := v["controllers"].([]any)
		return len(c) > 0 && strings.Contains(c[0].(map[string]any)["lastExpansionError"].(string), "spec.size")
	})
	c := v["controllers"].([]any)[0].(map[string]any)
	if msg := c["lastExpansionError"].(string); !strings.Contains(msg, "room") || framework.ActualSize(v) != strconv.Itoa(48<<20) || c["size"] != strconv.Itoa(48<<20) {
		t.Fatalf("after a spec.size past the disk: %v", c)
	}
	framework.QemuIO(t, v["endpoint"].(string), "read -P 0xcd 31M 1M")
}
