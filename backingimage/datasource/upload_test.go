package datasource

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	longhorn "github.com/cadence-storage/longhorn-manager/k8s/pkg/apis/longhorn/v1beta2"
)

func TestUploadPreparesAVerifiedFile(t *testing.T) {
	data := randomBytes(t, 2<<20+7)
	s, c := start(t, Config{SourceType: "upload", ExpectedChecksum: sha(data)})
	st, err := c.Get(context.Background())
	if err != nil || st.State != longhorn.BackingImageStatePending {
		t.Fatalf("before the upload: %+v, %v", st, err)
	}
	st, err = c.Upload(context.Background(), bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if st.State != longhorn.BackingImageStateReadyForTransfer || st.Checksum != sha(data) || st.Size != int64(len(data)) {
		t.Fatalf("after the upload: %+v", st)
	}
	got, _ := os.ReadFile(s.finalPath())
	if !bytes.Equal(got, data) {
		t.Fatal("the uploaded file differs from what was sent")
	}
	_, err = c.Upload(context.Background(), bytes.NewReader(data), int64(len(data)))
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || !strings.Contains(apiErr.Message, "one upload") {
		t.Fatalf("a second upload: %v, want 409 saying a data source takes one upload", err)
	}
}

// failingReader gives n bytes, then an error, as a client that dies midway.
type failingReader struct {
	data []byte
	n    int
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("client died")
	}
	k := copy(p, r.data[:min(len(r.data), r.n, len(p))])
	r.data, r.n = r.data[k:], r.n-k
	return k, nil
}

func TestUploadFaults(t *testing.T) {
	data := randomBytes(t, 1<<20)
	cases := []struct {
		name      string
		body      io.Reader
		size      int64
		checksum  string
		fragments []string
	}{
		{"cut off midway", &failingReader{data: data, n: len(data) / 2}, int64(len(data)), "", []string{"upload cut off after", "of 1048576 bytes"}},
		{"fewer bytes than the size says", bytes.NewReader(data[:1000]), int64(len(data)), "", []string{"upload size mismatch: got 1000 bytes", "says 1048576"}},
		{"more bytes than the size says", bytes.NewReader(data), 1000, "", []string{"upload size mismatch: more than the 1000 bytes"}},
		{"wrong checksum", bytes.NewReader(data), int64(len(data)), strings.Repeat("1", 128), []string{"checksum mismatch"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, c := start(t, Config{SourceType: "upload", ExpectedChecksum: tc.checksum})
			if _, err := c.Upload(context.Background(), tc.body, tc.size); err == nil {
				t.Fatal("the upload succeeded")
			}
			wantFailed(t, waitState(t, c, 5e9), tc.fragments...)
			if _, err := os.Stat(s.finalPath()); !os.IsNotExist(err) {
				t.Errorf("a failed upload left a file at %s", s.finalPath())
			}
		})
	}
}

func TestUploadRequestsRefusedBeforeAnyData(t *testing.T) {
	_, c := start(t, Config{SourceType: "upload"})
	post := func(query, contentType string, body string) (int, string) {
		resp, err := c.http.Post(c.base+"/v1/file?"+query, contentType, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ name, query, contentType, body, want string }{
		{"no size", "action=upload", "multipart/form-data; boundary=x", "", "query parameter size \\\"\\\""},
		{"negative size", "action=upload&size=-3", "multipart/form-data; boundary=x", "", "positive integer"},
		{"not multipart", "action=upload&size=3", "application/json", "{}", "multipart/form-data"},
		{"no file part", "action=upload&size=3", "multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--x--\r\n", "no file part"},
		{"unknown action", "action=explode", "", "", "must be upload, transfer or cancel"},
		{"more than the disk holds", "action=upload&size=1152921504606846976", "multipart/form-data; boundary=x",
			"--x\r\nContent-Disposition: form-data; name=\"chunk\"; filename=\"f\"\r\n\r\nabc\r\n--x--\r\n", "free on the disk"},
	} {
		code, body := post(tc.query, tc.contentType, tc.body)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s, want 400 saying %q", tc.name, code, body, tc.want)
		}
	}
	st, _ := c.Get(context.Background())
	if st.State != longhorn.BackingImageStatePending {
		t.Fatalf("refused requests moved the data source to %s", st.State)
	}
}

// memExporter serves one snapshot from memory.
type memExporter struct{ data []byte }

type memSnapshot struct{ *bytes.Reader }

func (memSnapshot) Close() error { return nil }

func (e memExporter) OpenSnapshot(_ context.Context, volume, snapshot string) (SnapshotReader, error) {
	if volume != "vol" || snapshot != "snap" {
		return nil, errors.New("no such snapshot")
	}
	return memSnapshot{bytes.NewReader(e.data)}, nil
}

func exportParams(exportType string) map[string]string {
	return map[string]string{"volume-name": "vol", "snapshot-name": "snap", "export-type": exportType}
}

func TestExportFromVolume(t *testing.T) {
	data := randomBytes(t, 4<<20)
	t.Run("raw", func(t *testing.T) {
		s, c := start(t, Config{SourceType: "export-from-volume", Parameters: exportParams("raw"), Exporter: memExporter{data}, ExpectedChecksum: sha(data)})
		st := waitState(t, c, 10e9)
		if st.State != longhorn.BackingImageStateReadyForTransfer {
			t.Fatalf("status %+v", st)
		}
		got, _ := os.ReadFile(s.finalPath())
		if !bytes.Equal(got, data) {
			t.Fatal("the exported file differs from the snapshot")
		}
	})
	t.Run("missing snapshot", func(t *testing.T) {
		params := exportParams("raw")
		params["snapshot-name"] = "other"
		_, c := start(t, Config{SourceType: "export-from-volume", Parameters: params, Exporter: memExporter{data}})
		wantFailed(t, waitState(t, c, 10e9), "export snapshot other of volume vol", "no such snapshot")
	})
	t.Run("qcow2", func(t *testing.T) {
		if _, err := exec.LookPath("qemu-img"); err != nil {
			t.Skip("qemu-img is not installed (scripts/install-test-deps.sh installs it)")
		}
		s, c := start(t, Config{SourceType: "export-from-volume", Parameters: exportParams("qcow2"), Exporter: memExporter{data}})
		st := waitState(t, c, 20e9)
		if st.State != longhorn.BackingImageStateReadyForTransfer {
			t.Fatalf("status %+v", st)
		}
		back := filepath.Join(t.TempDir(), "back.raw")
		if out, err := exec.Command("qemu-img", "convert", "-f", "qcow2", "-O", "raw", s.finalPath(), back).CombinedOutput(); err != nil {
			t.Fatalf("the export is no qcow2 image: %v: %s", err, out)
		}
		got, _ := os.ReadFile(back)
		if !bytes.Equal(got, data) {
			t.Fatal("the qcow2 export does not hold the snapshot's bytes")
		}
		entries, _ := os.ReadDir(filepath.Dir(s.finalPath()))
		if len(entries) != 1 {
			t.Errorf("the export left %d entries in its folder, want the file alone", len(entries))
		}
	})
}
