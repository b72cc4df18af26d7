package client

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// inProcessHost is the host of an in-process client's requests: a
// loopback name, which the API's Host check always allows.
const inProcessHost = "in-process.localhost"

// NewInProcess returns a client whose requests the API's own handler h
// serves in this process, with no socket, TLS or connection: the manager
// runs its recurring jobs so. Each request goes through all of h (its
// authentication, validation and limits), as a CronJob pod's does over
// the network, so both runners do the same thing with the same checks.
func NewInProcess(h http.Handler, retryFor time.Duration) *Client {
	return &Client{
		base:     "http://" + inProcessHost,
		http:     &http.Client{Timeout: 60 * time.Second, Transport: handlerTransport{h: h}},
		retryFor: retryFor,
	}
}

// handlerTransport is an http.RoundTripper that serves each request with
// a handler and returns what it wrote.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (resp *http.Response, err error) {
	// The request as a server receives it; req itself is not modified,
	// as a RoundTripper must not.
	in := req.Clone(req.Context())
	in.RequestURI = req.URL.RequestURI()
	in.Host = req.URL.Host
	// A server's request URL is the request line's: path and query.
	in.URL.Scheme, in.URL.Host, in.URL.User = "", "", nil
	in.RemoteAddr = "in-process"
	in.Proto, in.ProtoMajor, in.ProtoMinor = "HTTP/1.1", 1, 1
	if in.Body == nil {
		in.Body = http.NoBody
	}
	w := &responseBuffer{header: http.Header{}}
	defer func() {
		// A handler's panic is the request's error, as a server's
		// connection would end, not the caller's crash.
		if p := recover(); p != nil {
			resp, err = nil, fmt.Errorf("%s %s: the API's handler panicked: %v", req.Method, req.URL.Path, p)
		}
	}()
	t.h.ServeHTTP(w, in)
	w.WriteHeader(http.StatusOK) // when the handler wrote nothing
	return &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.written,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       req,
	}, nil
}

// responseBuffer is the http.ResponseWriter of an in-process request: it
// keeps the status, the header as it was when the status was written,
// and the body.
type responseBuffer struct {
	header  http.Header
	written http.Header
	status  int
	body    bytes.Buffer
}

func (w *responseBuffer) Header() http.Header {
	return w.header
}

func (w *responseBuffer) WriteHeader(status int) {
	if w.status != 0 {
		return
	}
	w.status = status
	w.written = w.header.Clone()
}

func (w *responseBuffer) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// Flush does nothing: the whole answer is returned at once.
func (w *responseBuffer) Flush() {}
