package app

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// actualSize is the size the volume's engine has, as the API's
// controllers[0].actualSize shows it ("" without an engine).
func actualSize(v map[string]any) string {
	list, _ := v["controllers"].([]any)
	if len(list) == 0 {
		return ""
	}
	s, _ := list[0].(map[string]any)["actualSize"].(string)
	return s
}

// The expand action, online and offline: an attached volume grows while
// its data is served (the old data reads back, the new space is zeros and
// takes writes), a detached one grows when it next attaches; the Replica
// objects record the new size; bad sizes are refused naming size.
func TestVolumeExpandAction(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t)
	e.call(t, "POST", "/v1/volumes", `{"name":"grow","size":"16Mi","numberOfReplicas":2}`).expect(t, 200)
	v := e.waitVolume(t, "grow", "detached with its objects", func(v map[string]any) bool { return v["state"] == "detached" })
	if _, ok := v["actions"].(map[string]any)["expand"]; !ok {
		t.Errorf("a volume does not offer expand: %v", v["actions"])
	}
	e.call(t, "POST", "/v1/volumes/grow?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	v = e.waitVolume(t, "grow", "attached", func(v map[string]any) bool { return v["state"] == "attached" && v["endpoint"] != "" })
	endpoint := v["endpoint"].(string)
	qemuIO(t, endpoint, "write -P 0xab 0 16M", "flush")

	// Bad input, refused naming the field; nothing changes.
	e.call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"8Mi"}`).expect(t, 400, "size", "never shrinks")
	e.call(t, "POST", "/v1/volumes/grow?action=expand", `{}`).expect(t, 400, "size: required")
	e.call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"lots"}`).expect(t, 400, "size")
	e.call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"`+strconv.Itoa(1<<60)+`"}`).expect(t, 400, "InsufficientCapacity", "size")
	e.call(t, "POST", "/v1/volumes/nope?action=expand", `{"size":"32Mi"}`).expect(t, 404)
	e.call(t, "POST", "/v1/volumes/grow?action=cancelExpansion", `{}`).expect(t, 422, "cancelExpansion")

	// Online: 16 MiB to 32 MiB (31 MiB + 1 byte rounds up to 32 MiB).
	grown := e.call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"`+strconv.Itoa(31<<20+1)+`"}`).expect(t, 200)
	if grown.body["size"] != strconv.Itoa(32<<20) {
		t.Fatalf("expanded volume's size %v, want %d (rounded up to 2 MiB)", grown.body["size"], 32<<20)
	}
	e.waitVolume(t, "grow", "the engine at 32 MiB", func(v map[string]any) bool { return actualSize(v) == strconv.Itoa(32<<20) })
	e.call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"32Mi"}`).expect(t, 200) // the same size again
	qemuIO(t, endpoint, "write -P 0xcd 31M 1M", "flush")
	data := deviceContent(t, endpoint)
	want := append(append(bytes.Repeat([]byte{0xab}, 16<<20), make([]byte, 15<<20)...), bytes.Repeat([]byte{0xcd}, 1<<20)...)
	if !bytes.Equal(data, want) {
		t.Fatalf("after growing online: %d bytes, not the old data, zeros and the new write", len(data))
	}
	eventually(t, 20*time.Second, "replicas record 32 MiB", func() (bool, error) {
		list, err := e.lh.LonghornV1beta2().Replicas(e.ns).List(context.Background(), metav1.ListOptions{})
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
	e.call(t, "POST", "/v1/volumes/grow?action=detach", "").expect(t, 200)
	e.waitVolume(t, "grow", "detached", func(v map[string]any) bool { return v["state"] == "detached" })
	e.call(t, "POST", "/v1/volumes/grow?action=expand", `{"size":"48Mi"}`).expect(t, 200)
	e.call(t, "POST", "/v1/volumes/grow?action=attach", `{"hostId":"node-1"}`).expect(t, 200)
	v = e.waitVolume(t, "grow", "attached at 48 MiB", func(v map[string]any) bool {
		return v["state"] == "attached" && actualSize(v) == strconv.Itoa(48<<20)
	})
	data = deviceContent(t, v["endpoint"].(string))
	want = append(want, make([]byte, 16<<20)...)
	if !bytes.Equal(data, want) {
		t.Fatalf("after growing offline: %d bytes, not the data then zeros", len(data))
	}
	if out := qemuIO(t, v["endpoint"].(string), "read -P 0 32M 16M"); !strings.Contains(out, "read") {
		t.Fatalf("qemu-io: %s", out)
	}

	// spec.size written with kubectl past the disk's room: the apiserver
	// takes it (a CEL rule refuses only shrinking), the controller does
	// not grow the volume and says why; the volume serves at its size.
	vol, err := e.lh.LonghornV1beta2().Volumes(e.ns).Get(context.Background(), "grow", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vol.Spec.Size = 1 << 60
	if _, err := e.lh.LonghornV1beta2().Volumes(e.ns).Update(context.Background(), vol, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	v = e.waitVolume(t, "grow", "the growth refused", func(v map[string]any) bool {
		c, _ := v["controllers"].([]any)
		return len(c) > 0 && strings.Contains(c[0].(map[string]any)["lastExpansionError"].(string), "spec.size")
	})
	c := v["controllers"].([]any)[0].(map[string]any)
	if msg := c["lastExpansionError"].(string); !strings.Contains(msg, "room") || actualSize(v) != strconv.Itoa(48<<20) || c["size"] != strconv.Itoa(48<<20) {
		t.Fatalf("after a spec.size past the disk: %v", c)
	}
	qemuIO(t, v["endpoint"].(string), "read -P 0xcd 31M 1M")
}
