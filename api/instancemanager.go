package api

import (
	"net/http"
	"sort"

	"github.com/gorilla/mux"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

// InstanceManager is a node's instance manager as Longhorn's API shows it
// (GET /v1/instancemanagers, which Longhorn's UI reads): the pod that
// runs the node's engines, its state and what it runs.
type InstanceManager struct {
	Resource
	Name             string                              `json:"name"`
	NodeID           string                              `json:"nodeID"`
	Image            string                              `json:"image"`
	ManagerType      string                              `json:"managerType"`
	DataEngine       string                              `json:"dataEngine"`
	CurrentState     string                              `json:"currentState"`
	IP               string                              `json:"ip"`
	InstanceEngines  map[string]longhorn.InstanceProcess `json:"instanceEngines"`
	InstanceReplicas map[string]longhorn.InstanceProcess `json:"instanceReplicas"`
}

var instanceManagerSchema = Schema{
	ID: "instanceManager", PluralName: "instanceManagers", collectionPath: "instancemanagers",
	CollectionMethods: []string{"GET"}, ResourceMethods: []string{"GET"},
	ResourceFields: map[string]Field{
		"name": {Type: "string"}, "nodeID": {Type: "string"}, "image": {Type: "string"}, "managerType": {Type: "string"},
		"dataEngine": {Type: "string"}, "currentState": {Type: "string"}, "ip": {Type: "string"},
		"instanceEngines": {Type: "map[instanceProcess]"}, "instanceReplicas": {Type: "map[instanceProcess]"},
	},
}

func toInstanceManager(base string, im *longhorn.InstanceManager) InstanceManager {
	engines, replicas := im.Status.InstanceEngines, im.Status.InstanceReplicas
	if engines == nil {
		engines = map[string]longhorn.InstanceProcess{}
	}
	if replicas == nil {
		replicas = map[string]longhorn.InstanceProcess{}
	}
	return InstanceManager{
		Resource: resource(base, "instanceManager", "instancemanagers", im.Name),
		Name:     im.Name, NodeID: im.Spec.NodeID, Image: im.Spec.Image, ManagerType: string(im.Spec.Type),
		DataEngine: string(im.Spec.DataEngine), CurrentState: string(im.Status.CurrentState), IP: im.Status.IP,
		InstanceEngines: engines, InstanceReplicas: replicas,
	}
}

func (s *Server) instanceManagerCollection(base string) (Collection, error) {
	list, err := s.ds.ListInstanceManagersRO()
	if err != nil {
		return Collection{}, err
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	data := make([]InstanceManager, 0, len(list))
	for _, im := range list {
		data = append(data, toInstanceManager(base, im))
	}
	return collection(base, "instanceManager", "instancemanagers", data), nil
}

func (s *Server) listInstanceManagers(w http.ResponseWriter, r *http.Request) error {
	c, err := s.instanceManagerCollection(baseURL(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) getInstanceManager(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	im, err := s.ds.GetInstanceManagerRO(name)
	if apierrors.IsNotFound(err) {
		return notFound("instance manager %q not found", name)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toInstanceManager(baseURL(r), im))
	return nil
}
