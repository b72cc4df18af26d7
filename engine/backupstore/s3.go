package backupstore

// The S3 driver uses minio-go (github.com/minio/minio-go/v7) rather than
// aws-sdk-go-v2: it is one module with a handful of small dependencies
// (aws-sdk-go-v2 needs a dozen modules for S3 alone), it is made for
// S3-compatible servers as much as for AWS (MinIO, Ceph, versitygw,
// SeaweedFS...), it speaks path-style and virtual-hosted-style requests,
// and it retries transient failures itself, re-sending a request body it
// can seek (a whole object here) with backoff.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

// The keys of the backup-target-credential-secret, as Longhorn names them.
const (
	CredAccessKeyID        = "AWS_ACCESS_KEY_ID"
	CredSecretAccessKey    = "AWS_SECRET_ACCESS_KEY"
	CredSessionToken       = "AWS_SESSION_TOKEN"
	CredEndpoints          = "AWS_ENDPOINTS"
	CredCert               = "AWS_CERT"
	CredVirtualHostedStyle = "VIRTUAL_HOSTED_STYLE"
)

// credentialSecretSetting is named in errors that a wrong credential
// explains: it is where the user fixes them.
const credentialSecretSetting = "backup-target-credential-secret"

// Defaults of S3Driver's bounds.
const (
	// DefaultS3Timeout bounds a request that moves little data.
	DefaultS3Timeout = 30 * time.Second
	// DefaultS3MinRate is the slowest transfer a request is given time
	// for: a 2 MiB block gets DefaultS3Timeout plus 4 s.
	DefaultS3MinRate = 512 << 10
	// s3MaxRetries is how often minio-go sends a request that failed
	// for a transient reason (a reset connection, a 5xx, SlowDown): 5
	// tries with backoff from 200 ms up to 1 s each, a few seconds in all.
	s3MaxRetries = 5
)

// S3Driver keeps objects in an S3 bucket, under a path.
type S3Driver struct {
	// Timeout bounds each call, its retries included; a call that moves
	// n bytes gets n/MinRate more. A server that stalls fails the call
	// with an error saying so.
	Timeout time.Duration
	// MinRate is in bytes per second.
	MinRate int64

	client   *minio.Client
	core     minio.Core
	bucket   string
	prefix   string // "" or "path/"
	endpoint string // for errors: the URL the requests go to

	// bucketSeen is set once the bucket is known to exist: a HEAD of a
	// missing object and one in a missing bucket both answer a bare 404.
	bucketSeen atomic.Bool
	// bodyCheck is how the server checks a PUT's body (bodyCheck*).
	bodyCheck atomic.Int32
}

var (
	s3RegionPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*[a-z0-9]$|^[a-z0-9]$`)
)

// S3Config is what an s3:// target and its credential name.
type S3Config struct {
	Bucket, Region, Prefix string
	Endpoint               *url.URL // nil for AWS
	AccessKeyID, Secret    string
	SessionToken           string
	CAs                    *x509.CertPool // nil for the system's
	VirtualHostedStyle     bool
}

// ParseS3Target checks an s3://<bucket>@<region>/<path> target and the
// credential (the backup-target-credential-secret's data) and says which
// part is wrong.
func ParseS3Target(target string, cred map[string]string) (*S3Config, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("backup target %q: %v", target, err)
	}
	if u.Scheme != "s3" {
		return nil, fmt.Errorf("backup target %q: not an s3:// URL", target)
	}
	c := &S3Config{}
	if u.User == nil || u.User.Username() == "" {
		return nil, fmt.Errorf("backup target %q: the bucket is missing: use s3://<bucket>@<region>/<path>", target)
	}
	if _, hasPassword := u.User.Password(); hasPassword {
		return nil, fmt.Errorf("backup target %q: use s3://<bucket>@<region>/<path>; credentials go in the %s Secret, not the URL", target, credentialSecretSetting)
	}
	c.Bucket = u.User.Username()
	if err := s3utils.CheckValidBucketName(c.Bucket); err != nil {
		return nil, fmt.Errorf("backup target %q: bucket %q: %v", target, c.Bucket, err)
	}
	c.Region = u.Host
	if c.Region == "" {
		return nil, fmt.Errorf("backup target %q: the region is missing: use s3://<bucket>@<region>/<path> (for example us-east-1)", target)
	}
	if !s3RegionPattern.MatchString(c.Region) {
		return nil, fmt.Errorf("backup target %q: region %q must be lower-case letters, digits and dashes (for example us-east-1)", target, c.Region)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("backup target %q: an s3:// target takes no query or fragment", target)
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		if path.Clean(p) != p || strings.HasPrefix(p, "../") || p == ".." {
			return nil, fmt.Errorf("backup target %q: path %q must be clean (no empty, . or .. parts)", target, u.Path)
		}
		c.Prefix = p + "/"
	}

	c.AccessKeyID, c.Secret, c.SessionToken = cred[CredAccessKeyID], cred[CredSecretAccessKey], cred[CredSessionToken]
	if ep := strings.TrimSpace(cred[CredEndpoints]); ep != "" {
		e, err := url.Parse(ep)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" {
			return nil, credentialErrorf("%s %q must be the URL of an S3 server, http(s)://host[:port]", CredEndpoints, ep)
		}
		if e.User != nil {
			return nil, credentialErrorf("%s must be http(s)://host[:port] only, with no user or password in it: the keys go in %s and %s", CredEndpoints, CredAccessKeyID, CredSecretAccessKey)
		}
		if strings.Trim(e.Path, "/") != "" || e.RawQuery != "" {
			return nil, credentialErrorf("%s %q must be http(s)://host[:port] only: no path or query (the bucket and path go in the backup target)", CredEndpoints, ep)
		}
		c.Endpoint = &url.URL{Scheme: e.Scheme, Host: e.Host}
		// An S3-compatible server has no instance role to fall back on.
		if c.AccessKeyID == "" {
			return nil, credentialErrorf("%s is missing from the %s Secret: the S3 server at %s needs it", CredAccessKeyID, credentialSecretSetting, ep)
		}
	}
	switch {
	case c.AccessKeyID != "" && c.Secret == "":
		return nil, credentialErrorf("%s is missing from the %s Secret: %s is set and needs it", CredSecretAccessKey, credentialSecretSetting, CredAccessKeyID)
	case c.AccessKeyID == "" && c.Secret != "":
		return nil, credentialErrorf("%s is missing from the %s Secret: %s is set and needs it", CredAccessKeyID, credentialSecretSetting, CredSecretAccessKey)
	}
	if pemData := cred[CredCert]; strings.TrimSpace(pemData) != "" {
		pool, err := parseCABundle([]byte(pemData))
		if err != nil {
			return nil, credentialErrorf("%s in the %s Secret: %v", CredCert, credentialSecretSetting, err)
		}
		c.CAs = pool
	}
	switch v := strings.TrimSpace(cred[CredVirtualHostedStyle]); strings.ToLower(v) {
	case "true":
		c.VirtualHostedStyle = true
	case "", "false":
	default:
		return nil, credentialErrorf("%s %q must be true or false", CredVirtualHostedStyle, v)
	}
	return c, nil
}

// credentialError is a backup-target-credential-secret whose content is
// wrong: a key missing or malformed.
type credentialError struct{ error }

func (e credentialError) Unwrap() error { return e.error }

func credentialErrorf(format string, args ...any) error {
	return credentialError{fmt.Errorf(format, args...)}
}

// IsCredentialError reports whether err is fixed in the
// backup-target-credential-secret: a key missing or malformed, keys the
// server refuses, or a server certificate AWS_CERT does not vouch for.
func IsCredentialError(err error) bool {
	var ce credentialError
	var se *S3Error
	return errors.As(err, &ce) || (errors.As(err, &se) && se.Credential)
}

// parseCABundle reads PEM certificates onto the system's roots.
func parseCABundle(data []byte) (*x509.CertPool, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	n := 0
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("holds a PEM %q block; only CERTIFICATE blocks belong in a CA bundle", block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %v", n+1, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, errors.New("no PEM certificate found (expected -----BEGIN CERTIFICATE-----)")
	}
	if len(bytes.TrimSpace(data)) > 0 {
		return nil, fmt.Errorf("text after certificate %d is not PEM", n)
	}
	return pool, nil
}

// transports are shared by drivers of the same server and CA bundle, so
// a store opened for every call reuses its connections.
var (
	transportsMu sync.Mutex
	transports   = map[string]*http.Transport{}
)

func s3Transport(secure bool, caPEM string, cas *x509.CertPool) (*http.Transport, error) {
	key := fmt.Sprintf("%t\x00%s", secure, caPEM)
	transportsMu.Lock()
	defer transportsMu.Unlock()
	if tr, ok := transports[key]; ok {
		return tr, nil
	}
	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, err
	}
	// Dialing is bounded by the call's deadline too; this catches an
	// address that drops packets sooner.
	tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	if secure && cas != nil {
		if tr.TLSClientConfig == nil {
			tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		tr.TLSClientConfig.RootCAs = cas
	}
	transports[key] = tr
	return tr, nil
}

// NewS3Driver returns the driver of an s3://<bucket>@<region>/<path>
// target. It checks the target and credential and makes no request.
func NewS3Driver(target string, cred map[string]string) (*S3Driver, error) {
	c, err := ParseS3Target(target, cred)
	if err != nil {
		return nil, err
	}
	host, secure := "s3."+c.Region+".amazonaws.com", true
	if c.Endpoint != nil {
		host, secure = c.Endpoint.Host, c.Endpoint.Scheme == "https"
	}
	tr, err := s3Transport(secure, cred[CredCert], c.CAs)
	if err != nil {
		return nil, err
	}
	var creds *credentials.Credentials
	if c.AccessKeyID != "" {
		creds = credentials.NewStaticV4(c.AccessKeyID, c.Secret, c.SessionToken)
	} else {
		// AWS without keys: the environment's, or the node's instance
		// role, as the AWS tools do; never none (signedOnly).
		creds = credentials.New(signedOnly{chain: &credentials.Chain{Providers: []credentials.Provider{&credentials.EnvAWS{}, &credentials.IAM{}}}})
	}
	lookup := minio.BucketLookupPath
	if c.VirtualHostedStyle {
		lookup = minio.BucketLookupDNS
	}
	client, err := minio.New(host, &minio.Options{
		Creds: creds, Secure: secure, Transport: tr, Region: c.Region,
		BucketLookup: lookup, MaxRetries: s3MaxRetries,
		// minio-go sends a checksum header (put) only with this set.
		TrailingHeaders: true,
	})
	if err != nil {
		return nil, fmt.Errorf("backup target %q: %v", target, err)
	}
	scheme := "https"
	if !secure {
		scheme = "http"
	}
	return &S3Driver{
		Timeout: DefaultS3Timeout, MinRate: DefaultS3MinRate,
		client: client, core: minio.Core{Client: client},
		bucket: c.Bucket, prefix: c.Prefix, endpoint: scheme + "://" + host,
	}, nil
}

func (d *S3Driver) object(key string) string { return d.prefix + strings.TrimPrefix(key, "/") }

// transferTime is the time n bytes may take at MinRate.
func (d *S3Driver) transferTime(n int64) time.Duration {
	if d.MinRate <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second / time.Duration(d.MinRate)
}

// deadline is a call's context, cancelled when its time is up; extend
// moves the end to d from now (as a transfer's size becomes known or it
// makes progress).
type deadline struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	mu     sync.Mutex
	limit  time.Duration
}

// errS3Timeout is the cause of a call's context that ran out of time.
var errS3Timeout = errors.New("the S3 server did not answer in time")

func (d *S3Driver) newDeadline(limit time.Duration) *deadline {
	ctx, cancel := context.WithCancelCause(context.Background())
	dl := &deadline{ctx: ctx, cancel: cancel, limit: limit}
	dl.timer = time.AfterFunc(limit, func() { cancel(errS3Timeout) })
	return dl
}

func (dl *deadline) extend(limit time.Duration) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.timer.Stop() {
		dl.limit = limit
		dl.timer.Reset(limit)
	}
}

func (dl *deadline) stop() {
	dl.timer.Stop()
	dl.cancel(nil)
}

// S3Error is a failed call: what, on which object, and why in plain words.
type S3Error struct {
	Op       string // read, write, list, check, delete
	Bucket   string
	Key      string // the object, or the prefix listed
	Endpoint string
	Reason   string
	Err      error // fs.ErrNotExist for a missing object, else the cause
	// Credential is set when the backup-target-credential-secret is what
	// to fix: the server refused the keys, or its certificate is not
	// trusted.
	Credential bool
}

func (e *S3Error) Error() string {
	return fmt.Sprintf("%s s3://%s/%s at %s: %s", e.Op, e.Bucket, e.Key, e.Endpoint, e.Reason)
}

func (e *S3Error) Unwrap() error { return e.Err }

// fail explains err.
func (d *S3Driver) fail(op, object string, err error, dl *deadline) error {
	e := &S3Error{Op: op, Bucket: d.bucket, Key: object, Endpoint: d.endpoint, Err: err}
	var resp minio.ErrorResponse
	var uerr *url.Error
	var unknownAuthority x509.UnknownAuthorityError
	var hostnameErr x509.HostnameError
	var certInvalid x509.CertificateInvalidError
	switch {
	case dl != nil && errors.Is(context.Cause(dl.ctx), errS3Timeout):
		e.Reason = fmt.Sprintf("the S3 server did not answer within %s (it is stalled or too slow)", dl.limit)
		e.Err = errS3Timeout
	case errors.As(err, &resp) && resp.Code != "":
		e.Reason, e.Credential = d.explainResponse(resp)
		if resp.Code == "NoSuchKey" {
			e.Err = ErrNotExist
		}
	case errors.As(err, &unknownAuthority), errors.As(err, &hostnameErr), errors.As(err, &certInvalid):
		e.Reason = fmt.Sprintf("the S3 server's TLS certificate is not trusted: %v (set %s in the %s Secret to the CA bundle that signed it)", err, CredCert, credentialSecretSetting)
		e.Credential = true
	case err != nil && strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		e.Reason = fmt.Sprintf("the server answers plain HTTP, not HTTPS: use an http:// URL in %s", CredEndpoints)
		e.Credential = true
	case errors.As(err, &uerr):
		e.Reason = fmt.Sprintf("cannot reach the S3 server: %v", uerr.Err)
	default:
		e.Reason = err.Error()
	}
	return e
}

// explainResponse says what an error response means, and whether the
// credential is what to fix.
func (d *S3Driver) explainResponse(resp minio.ErrorResponse) (reason string, credential bool) {
	detail := resp.Code
	if resp.Message != "" {
		detail += ": " + resp.Message
	}
	switch resp.Code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidSecurity",
		"XAdminUserNotFound": // versitygw's for an unknown access key
		return fmt.Sprintf("access denied: check the %s (%s)", credentialSecretSetting, detail), true
	case "NoSuchBucket":
		return fmt.Sprintf("bucket %q does not exist on the S3 server: create it, or fix the bucket in the backup-target setting", d.bucket), false
	case "NoSuchKey":
		return "no such object", false
	case "AuthorizationHeaderMalformed", "InvalidRegion", "PermanentRedirect", "IllegalLocationConstraintException":
		return fmt.Sprintf("the bucket is not in the region the backup target names: fix the region in the backup-target setting (%s)", detail), false
	case "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout":
		return fmt.Sprintf("the S3 server failed, after retries (%s)", detail), false
	}
	if resp.StatusCode == http.StatusForbidden {
		// Servers have their own codes for a key they do not know.
		return fmt.Sprintf("access denied: check the %s (%s)", credentialSecretSetting, detail), true
	}
	return detail, false
}

// Write stores data as one object. A single PUT with a checksum of the
// body the server checks (see put): an object is all there or not there,
// and minio-go re-sends the whole of it on a transient failure.
func (d *S3Driver) Write(key string, data []byte) error {
	object := d.object(key)
	dl := d.newDeadline(d.Timeout + d.transferTime(int64(len(data))))
	defer dl.stop()
	if d.bodyCheck.Load() == bodyCheckMD5 {
		return d.put(dl, object, data, true)
	}
	return d.put(dl, object, data, false)
}

// How a PUT's body is checked by the server, so that an object stored is
// the bytes sent: by a CRC32C in a signed header (x-amz-checksum-crc32c,
// next to free to compute) where the server is known or may prove to
// check it, else by Content-MD5, which every S3 server checks. The body
// itself is not signed (UNSIGNED-PAYLOAD, as over HTTPS): signing it over
// plain HTTP costs a SHA-256 of every byte on both sides, and the blocks
// are checked against their SHA-256 on restore anyway.
const (
	bodyCheckUnknown = iota
	bodyCheckCRC32C
	bodyCheckMD5
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// refusesChecksumHeader reports whether a PUT failed because the server
// does not take x-amz-checksum-* headers (some S3-compatible servers made
// before AWS added them), rather than because the body did not match
// (BadDigest, which is an error).
func refusesChecksumHeader(err error) bool {
	var resp minio.ErrorResponse
	if !errors.As(err, &resp) || resp.Code == "BadDigest" {
		return false
	}
	return resp.Code == "NotImplemented" ||
		((resp.Code == "InvalidArgument" || resp.Code == "InvalidRequest") && strings.Contains(strings.ToLower(resp.Message), "checksum"))
}

// put sends one PUT. A server that does not echo the CRC32C sent may not
// have checked it: the object is sent again with Content-MD5, and so are
// the driver's later writes.
func (d *S3Driver) put(dl *deadline, object string, data []byte, md5 bool) error {
	opts := minio.PutObjectOptions{DisableMultipart: true, DisableContentSha256: true, ContentType: "application/octet-stream"}
	var crc string
	if md5 {
		opts.SendContentMd5 = true
	} else {
		sum := crc32.Checksum(data, castagnoli)
		crc = base64.StdEncoding.EncodeToString([]byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})
		opts.UserMetadata = map[string]string{"x-amz-checksum-crc32c": crc}
	}
	info, err := d.client.PutObject(dl.ctx, d.bucket, object, bytes.NewReader(data), int64(len(data)), opts)
	if err != nil && !md5 && refusesChecksumHeader(err) {
		d.bodyCheck.Store(bodyCheckMD5)
		return d.put(dl, object, data, true)
	}
	if err != nil {
		return d.fail("write", object, err, dl)
	}
	if !md5 && info.ChecksumCRC32C != crc {
		d.bodyCheck.Store(bodyCheckMD5)
		return d.put(dl, object, data, true)
	}
	if !md5 {
		d.bodyCheck.CompareAndSwap(bodyCheckUnknown, bodyCheckCRC32C)
	}
	return nil
}

// Read returns the object, of at most limit bytes. Its time is Timeout
// until it answers, then as long as its size needs at MinRate.
func (d *S3Driver) Read(key string, limit int64) ([]byte, error) {
	object := d.object(key)
	dl := d.newDeadline(d.Timeout)
	defer dl.stop()
	body, info, _, err := d.core.GetObject(dl.ctx, d.bucket, object, minio.GetObjectOptions{})
	if err != nil {
		return nil, d.fail("read", object, err, dl)
	}
	defer body.Close()
	if info.Size > limit {
		return nil, tooLarge(key, info.Size, limit)
	}
	dl.extend(d.Timeout + d.transferTime(info.Size))
	buf := bytes.NewBuffer(make([]byte, 0, min(max(info.Size, 0), 64<<20)+bytes.MinRead))
	// A server that sends more than it announced (or announces no size)
	// is read one byte past the cap, to tell.
	n, err := io.Copy(buf, io.LimitReader(body, limit+1))
	if err != nil {
		return nil, d.fail("read", object, err, dl)
	}
	if n > limit {
		return nil, tooLarge(key, n, limit)
	}
	if info.Size >= 0 && int64(buf.Len()) != info.Size {
		return nil, d.fail("read", object, fmt.Errorf("got %d of its %d bytes", buf.Len(), info.Size), dl)
	}
	return buf.Bytes(), nil
}

func (d *S3Driver) Exists(key string) (bool, error) {
	object := d.object(key)
	dl := d.newDeadline(d.Timeout)
	defer dl.stop()
	_, err := d.client.StatObject(dl.ctx, d.bucket, object, minio.StatObjectOptions{})
	if err == nil {
		d.bucketSeen.Store(true)
		return true, nil
	}
	err = d.fail("check", object, err, dl)
	if !errors.Is(err, ErrNotExist) {
		return false, err
	}
	// A missing bucket must not pass for an empty one: asked once.
	if !d.bucketSeen.Load() {
		ok, berr := d.client.BucketExists(dl.ctx, d.bucket)
		switch {
		case berr != nil:
			return false, d.fail("check", object, berr, dl)
		case !ok:
			return false, d.fail("check", object, minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: http.StatusNotFound}, dl)
		}
		d.bucketSeen.Store(true)
	}
	return false, nil
}

// List returns the objects and "directories" (common prefixes) directly
// under prefix. Its time is Timeout from each answer the server gives.
func (d *S3Driver) List(prefix string) ([]string, error) {
	return d.list(prefix, false)
}

// ListAll returns every key under prefix, at any depth, in one listing
// (a page per 1,000 keys) rather than one request per "folder".
func (d *S3Driver) ListAll(prefix string) ([]string, error) {
	return d.list(prefix, true)
}

// list names the keys under prefix, one level deep ("directories" among
// them) or, recursive, every object at any depth.
func (d *S3Driver) list(prefix string, recursive bool) ([]string, error) {
	p := strings.Trim(prefix, "/")
	full := d.prefix
	if p != "" {
		full += p + "/"
	}
	dl := d.newDeadline(d.Timeout)
	defer dl.stop()
	var out []string
	for obj := range d.client.ListObjects(dl.ctx, d.bucket, minio.ListObjectsOptions{Prefix: full, Recursive: recursive}) {
		if obj.Err != nil {
			return nil, d.fail("list", full, obj.Err, dl)
		}
		dl.extend(d.Timeout)
		name := strings.TrimPrefix(obj.Key, full)
		if recursive && strings.HasSuffix(name, "/") {
			continue // a "folder" object some tools write
		}
		name = strings.TrimSuffix(name, "/")
		if name == "" || (!recursive && strings.Contains(name, "/")) {
			continue // the prefix itself, as some servers list it
		}
		out = append(out, strings.TrimPrefix(p+"/"+name, "/"))
	}
	// A channel closed by the deadline says nothing of it.
	if errors.Is(context.Cause(dl.ctx), errS3Timeout) {
		return nil, d.fail("list", full, dl.ctx.Err(), dl)
	}
	return out, nil
}

// Delete removes the object; a missing one is no error.
func (d *S3Driver) Delete(key string) error {
	object := d.object(key)
	dl := d.newDeadline(d.Timeout)
	defer dl.stop()
	if err := d.client.RemoveObject(dl.ctx, d.bucket, object, minio.RemoveObjectOptions{}); err != nil {
		err = d.fail("delete", object, err, dl)
		if errors.Is(err, ErrNotExist) {
			return nil
		}
		return err
	}
	return nil
}
