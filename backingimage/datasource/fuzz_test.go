package datasource

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzRequests asserts that no request makes the data source panic or
// answer 500: bad input is a 4xx naming what is wrong.
// go test ./backingimage/datasource -run '^$' -fuzz FuzzRequests -fuzztime 30s
func FuzzRequests(f *testing.F) {
	f.Add("POST", "/v1/file?action=upload&size=3", "multipart/form-data; boundary=x",
		"--x\r\nContent-Disposition: form-data; name=\"f\"; filename=\"b\"\r\n\r\nabc\r\n--x--\r\n")
	f.Add("POST", "/v1/file?action=upload&size=99999999999999999999", "multipart/form-data; boundary=x", "--x")
	f.Add("POST", "/v1/file?action=transfer", "", "")
	f.Add("POST", "/v1/file?action=cancel", "", "")
	f.Add("GET", "/v1/file/content", "", "")
	f.Add("PUT", "/v1/file", "text/plain", "x")
	disk := newDisk(f, "disk-1")
	f.Fuzz(func(t *testing.T, method, target, contentType, body string) {
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(method, " \t\r\n") || method == "" {
			return
		}
		s, err := New(Config{Name: "image", UUID: "u1", DiskPath: disk, DiskUUID: "disk-1", SourceType: "upload", Log: quietLog()})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		req, err := http.NewRequest(method, "http://127.0.0.1"+target, strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", contentType)
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s answered %d: %s", method, target, rec.Code, rec.Body)
		}
	})
}
