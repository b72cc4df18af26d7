package api

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sort"

	"github.com/gorilla/mux"
)

// EngineImage is a version of the data plane as Longhorn's API shows it
// (GET /v1/engineimages, which Longhorn's UI reads): here the engine is
// the manager's own image, run by the nodes' instance managers, so each
// image an instance manager runs is one, and the manager's own is the
// default, the one new engines start in. The UI marks a volume whose
// currentImage is not the default's "upgrade available": its engine
// still runs in an instance manager of an older image, and moves at its
// next attach.
type EngineImage struct {
	Resource
	Name    string `json:"name"`
	Image   string `json:"image"`
	Default bool   `json:"default"`
	State   string `json:"state"`
	// RefCount is how many engines run it.
	RefCount int `json:"refCount"`
	// NodeDeploymentMap says on which nodes an instance manager runs it.
	NodeDeploymentMap map[string]bool `json:"nodeDeploymentMap"`
	Incompatible      bool            `json:"incompatible"`
	DataEngine        string          `json:"dataEngine"`
	OwnerID           string          `json:"ownerID"`
}

var engineImageSchema = Schema{
	ID: "engineImage", PluralName: "engineImages", collectionPath: "engineimages",
	CollectionMethods: []string{"GET"}, ResourceMethods: []string{"GET"},
	ResourceFields: map[string]Field{
		"name": {Type: "string"}, "image": {Type: "string"}, "default": {Type: "boolean"}, "state": {Type: "string"},
		"refCount": {Type: "int"}, "nodeDeploymentMap": {Type: "map[boolean]"}, "incompatible": {Type: "boolean"},
		"dataEngine": {Type: "string"}, "ownerID": {Type: "string"},
	},
}

// engineImageName is Longhorn's form of an engine image's name, ei-<hash>.
func engineImageName(image string) string {
	sum := sha256.Sum256([]byte(image))
	return "ei-" + hex.EncodeToString(sum[:])[:8]
}

// SetEngineImage names the manager's image (--manager-image): the default
// engine image. "" (a manager run from its binary) lists only what the
// instance managers run.
func (s *Server) SetEngineImage(image string) { s.engineImage = image }

// engineImages are the images the instance managers run, and the
// manager's, by name.
func (s *Server) engineImages(base string) ([]EngineImage, error) {
	ims, err := s.ds.ListInstanceManagersRO()
	if err != nil {
		return nil, err
	}
	engines, err := s.ds.ListEnginesRO()
	if err != nil {
		return nil, err
	}
	byImage := map[string]*EngineImage{}
	get := func(image string) *EngineImage {
		ei, ok := byImage[image]
		if !ok {
			name := engineImageName(image)
			ei = &EngineImage{Resource: resource(base, "engineImage", "engineimages", name), Name: name, Image: image,
				Default: image == s.engineImage, State: "deployed", NodeDeploymentMap: map[string]bool{}, DataEngine: "v1"}
			byImage[image] = ei
		}
		return ei
	}
	if s.engineImage != "" {
		get(s.engineImage)
	}
	for _, im := range ims {
		if im.Spec.Image != "" {
			get(im.Spec.Image).NodeDeploymentMap[im.Spec.NodeID] = true
		}
	}
	for _, e := range engines {
		if e.Status.CurrentImage != "" {
			get(e.Status.CurrentImage).RefCount++
		}
	}
	out := make([]EngineImage, 0, len(byImage))
	for _, ei := range byImage {
		out = append(out, *ei)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (s *Server) engineImageCollection(base string) (Collection, error) {
	list, err := s.engineImages(base)
	if err != nil {
		return Collection{}, err
	}
	return collection(base, "engineImage", "engineimages", list), nil
}

func (s *Server) listEngineImages(w http.ResponseWriter, r *http.Request) error {
	c, err := s.engineImageCollection(baseURL(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (s *Server) getEngineImage(w http.ResponseWriter, r *http.Request) error {
	name := mux.Vars(r)["name"]
	list, err := s.engineImages(baseURL(r))
	if err != nil {
		return err
	}
	for _, ei := range list {
		if ei.Name == name {
			writeJSON(w, http.StatusOK, ei)
			return nil
		}
	}
	return notFound("engine image %q not found", name)
}
