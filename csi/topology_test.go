package csi

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

func TestTopologyNode(t *testing.T) {
	on := func(node string) *csi.Topology {
		return &csi.Topology{Segments: map[string]string{nodeTopologyKey: node}}
	}
	for _, tc := range []struct {
		name string
		req  *csi.TopologyRequirement
		want string
	}{
		{"no requirement", nil, ""},
		{"the first preferred (the scheduler's node, for WaitForFirstConsumer)", &csi.TopologyRequirement{
			Requisite: []*csi.Topology{on("a"), on("b")}, Preferred: []*csi.Topology{on("b"), on("a")}}, "b"},
		{"a preferred topology of another key is passed over", &csi.TopologyRequirement{
			Preferred: []*csi.Topology{{Segments: map[string]string{"topology.kubernetes.io/zone": "z1"}}, on("c")}}, "c"},
		{"a requisite of one node", &csi.TopologyRequirement{Requisite: []*csi.Topology{on("a")}}, "a"},
		{"a requisite of several nodes, none preferred, pins nothing", &csi.TopologyRequirement{Requisite: []*csi.Topology{on("a"), on("b")}}, ""},
	} {
		if got := topologyNode(tc.req); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
