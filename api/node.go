package api

import (
	"net/http"
	"sort"

	"github.com/gorilla/mux"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) error {
	nodes, err := s.ds.ListNodesRO()
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.nodeCollection(baseURL(r), nodes))
	return nil
}

func (s *Server) nodeCollection(base string, nodes []*longhorn.Node) Collection {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	data := make([]Node, 0, len(nodes))
	for _, n := range nodes {
		data = append(data, toNode(base, n))
	}
	return collection(base, "node", "nodes", data)
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	n, err := s.ds.GetNodeRO(name)
	if apierrors.IsNotFound(err) {
		return notFound("node %q not found", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toNode(baseURL(r), n))
	return nil
}
