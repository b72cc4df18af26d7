package csi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cadence-storage/longhorn-manager/client"
)

// raceAPI is the manager's backing image API as a CreateVolume sees it
// when another CreateVolume (another StorageClass's claim, provisioned at
// the same time) makes the same image first: the driver's read finds no
// image, its create is refused because the image exists by then, and a
// read after that finds the other one's image.
type raceAPI struct {
	mu    sync.Mutex
	image *client.BackingImage // what the other request made
	reads int
	// stillMissing is how many reads after the refused create find
	// nothing yet (the API's cache is behind).
	stillMissing int
	created      []client.BackingImage
}

func (a *raceAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/backingimages/"):
		a.reads++
		if a.reads == 1 || a.stillMissing > 0 {
			if a.reads > 1 {
				a.stillMissing--
			}
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"status":404,"code":"NotFound","message":"backing image not found"}`))
			return
		}
		_ = json.NewEncoder(w).Encode(a.image)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/backingimages":
		var in client.BackingImage
		_ = json.NewDecoder(r.Body).Decode(&in)
		a.created = append(a.created, in)
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"status":409,"code":"Conflict","message":"name: backing image \"` + in.Name + `\" already exists"}`))
	default:
		http.NotFound(w, r)
	}
}

func raceServer(t *testing.T, api *raceAPI) *controllerServer {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	d, err := NewDriver(client.NewClient(srv.URL+"/v1", time.Second), Options{Controller: true})
	if err != nil {
		t.Fatal(err)
	}
	return &controllerServer{d: d}
}

// TestPrepareBackingImageMadeMeanwhileIsChecked: when the image a
// StorageClass describes is made by another request between the driver's
// read and its create, the image that exists is checked as one found at
// once would be: another checksum or source is refused naming the
// parameter, the same one is used, and one the API does not show yet is
// a retry, not a success.
func TestPrepareBackingImageMadeMeanwhileIsChecked(t *testing.T) {
	const sumA = "aaaa"
	const sumB = "bbbb"
	url := "http://images.example/base.raw"
	params := func(sum, url string) *volumeParams {
		p, err := parseParams(map[string]string{
			paramBackingImage:             "base",
			paramBackingImageSourceType:   "download",
			paramBackingImageSourceParams: `{"url":"` + url + `"}`,
			paramBackingImageChecksum:     sum,
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	theirs := &client.BackingImage{Name: "base", SourceType: "download", Parameters: map[string]string{"url": url}, ExpectedChecksum: sumA}

	for _, tc := range []struct {
		name         string
		params       *volumeParams
		stillMissing int
		code         codes.Code
		says         string
	}{
		{"another checksum", params(sumB, url), 0, codes.InvalidArgument, paramBackingImageChecksum},
		{"another source", params(sumA, "http://images.example/other.raw"), 0, codes.InvalidArgument, paramBackingImage},
		{"the same image", params(sumA, url), 0, codes.OK, ""},
		{"not shown yet", params(sumB, url), 100, codes.Unavailable, "base"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := &raceAPI{image: theirs, stillMissing: tc.stillMissing}
			err := raceServer(t, api).prepareBackingImage(context.Background(), tc.params)
			if len(api.created) != 1 {
				t.Fatalf("%d creates, want the one the other request beat", len(api.created))
			}
			st := status.Convert(err)
			if st.Code() != tc.code || !strings.Contains(st.Message(), tc.says) {
				t.Fatalf("prepareBackingImage: %v; want %s naming %q", err, tc.code, tc.says)
			}
		})
	}
}
