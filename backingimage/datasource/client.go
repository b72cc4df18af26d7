package datasource

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/cadence-storage/longhorn-manager/mtls"
)

// Client talks to one data source server.
type Client struct {
	base string
	http *http.Client
	// Timeout bounds each call but uploads and content reads, which are
	// bounded by the server's stall timeout instead.
	Timeout time.Duration
}

// NewClient returns a client of the data source at address (host:port),
// speaking HTTPS with mutual TLS as id.
func NewClient(address string, id *mtls.Identity) *Client {
	c := &Client{base: "https://" + address, Timeout: 10 * time.Second}
	if id == nil {
		c.http = &http.Client{Transport: noIdentity{}}
	} else {
		c.http = id.HTTPClient()
	}
	return c
}

// noIdentity fails every request of a client made without an identity.
type noIdentity struct{}

func (noIdentity) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, fmt.Errorf("%s: no internal TLS identity to call the data source with", r.URL.Host)
}

// Error is an error answer of the server.
type Error struct {
	Op      string
	Status  int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("data source %s: %d %s: %s", e.Op, e.Status, http.StatusText(e.Status), e.Message)
}

func (c *Client) do(ctx context.Context, op string, req *http.Request, out any) error {
	resp, err := c.http.Do(req.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("data source %s: %w", op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e apiError
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(body, &e) != nil || e.Message == "" {
			e.Message = string(body)
		}
		return &Error{Op: op, Status: resp.StatusCode, Message: e.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("data source %s: decode the answer: %w", op, err)
	}
	return nil
}

func (c *Client) call(ctx context.Context, op, method, path string) (*FileStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequest(method, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	st := &FileStatus{}
	if err := c.do(ctx, op, req, st); err != nil {
		return nil, err
	}
	return st, nil
}

// Get is the file's state, size, progress and checksum.
func (c *Client) Get(ctx context.Context) (*FileStatus, error) {
	return c.call(ctx, "get", http.MethodGet, "/v1/file")
}

// Transfer asks for the complete file: the answer's Path is relative to
// the data source's disk.
func (c *Client) Transfer(ctx context.Context) (*FileStatus, error) {
	return c.call(ctx, "transfer", http.MethodPost, "/v1/file?action=transfer")
}

// Cancel stops a download, export or upload; the file ends failed.
func (c *Client) Cancel(ctx context.Context) (*FileStatus, error) {
	return c.call(ctx, "cancel", http.MethodPost, "/v1/file?action=cancel")
}

// Upload sends the file's size bytes from r as the one multipart upload.
func (c *Client) Upload(ctx context.Context, r io.Reader, size int64) (*FileStatus, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile("chunk", "backing")
		if err == nil {
			_, err = io.Copy(fw, r)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	q := url.Values{"action": {"upload"}, "size": {strconv.FormatInt(size, 10)}}
	req, err := http.NewRequest(http.MethodPost, c.base+"/v1/file?"+q.Encode(), pr)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	st := &FileStatus{}
	if err := c.do(ctx, "upload", req, st); err != nil {
		pr.CloseWithError(err)
		return nil, err
	}
	return st, nil
}

// Content streams the complete file; the caller closes it.
func (c *Client) Content(ctx context.Context) (io.ReadCloser, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/file/content", nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("data source content: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		var e apiError
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if json.Unmarshal(body, &e) != nil || e.Message == "" {
			e.Message = string(body)
		}
		return nil, 0, &Error{Op: "content", Status: resp.StatusCode, Message: e.Message}
	}
	return resp.Body, resp.ContentLength, nil
}
