package backupstore

import (
	"bytes"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/backupstore/s3test"
)

func TestS3TargetAndCredentialAreCheckedUpFront(t *testing.T) {
	ok := map[string]string{CredAccessKeyID: "id", CredSecretAccessKey: "secret", CredEndpoints: "http://127.0.0.1:9000"}
	with := func(k, v string) map[string]string {
		c := map[string]string{}
		for a, b := range ok {
			c[a] = b
		}
		if v == "" {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	cases := []struct {
		name   string
		target string
		cred   map[string]string
		want   string // a fragment of the error; "" for none
	}{
		{"path style on a server", "s3://backups@us-east-1/", ok, ""},
		{"a path in the bucket", "s3://backups@us-east-1/cluster/a", ok, ""},
		{"no path at all", "s3://backups@us-east-1", ok, ""},
		{"AWS with keys", "s3://backups@eu-west-3/", map[string]string{CredAccessKeyID: "id", CredSecretAccessKey: "s"}, ""},
		{"AWS with the node's role", "s3://backups@eu-west-3/", nil, ""},
		{"virtual hosted style", "s3://backups@us-east-1/", with(CredVirtualHostedStyle, "true"), ""},
		{"no bucket", "s3://@us-east-1/", ok, "bucket is missing"},
		{"no bucket nor region", "s3:///path", ok, "bucket is missing"},
		{"no region", "s3://backups@/path", ok, "region is missing"},
		{"bad bucket", "s3://a@us-east-1/", ok, `bucket "a"`},
		{"bad bucket name", "s3://back..ups@us-east-1/", ok, `bucket "back..ups"`},
		{"bad region", "s3://backups@US_EAST/", ok, `region "US_EAST"`},
		{"keys in the URL", "s3://backups:secret@us-east-1/", ok, "credentials go in the backup-target-credential-secret"},
		{"unclean path", "s3://backups@us-east-1/a/../b", ok, "must be clean"},
		{"a query", "s3://backups@us-east-1/?x=1", ok, "no query"},
		{"endpoint without a key", "s3://backups@us-east-1/", with(CredAccessKeyID, ""), "AWS_ACCESS_KEY_ID is missing from the backup-target-credential-secret"},
		{"key without a secret", "s3://backups@us-east-1/", with(CredSecretAccessKey, ""), "AWS_SECRET_ACCESS_KEY is missing"},
		{"secret without a key on AWS", "s3://backups@us-east-1/", map[string]string{CredSecretAccessKey: "s"}, "AWS_ACCESS_KEY_ID is missing"},
		{"endpoint not a URL", "s3://backups@us-east-1/", with(CredEndpoints, "minio:9000"), "AWS_ENDPOINTS"},
		{"endpoint with a path", "s3://backups@us-east-1/", with(CredEndpoints, "http://minio:9000/backups"), "AWS_ENDPOINTS"},
		{"endpoint with a password", "s3://backups@us-east-1/", with(CredEndpoints, "http://me:pass@minio:9000"), "no user or password"},
		{"cert not PEM", "s3://backups@us-east-1/", with(CredCert, "not a certificate"), "AWS_CERT"},
		{"cert a key", "s3://backups@us-east-1/", with(CredCert, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1}}))), "AWS_CERT"},
		{"cert corrupt", "s3://backups@us-east-1/", with(CredCert, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2}}))), "AWS_CERT"},
		{"virtual hosted style not a bool", "s3://backups@us-east-1/", with(CredVirtualHostedStyle, "yes"), "VIRTUAL_HOSTED_STYLE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewDriver(c.target, c.cred)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && err == nil:
				t.Fatalf("accepted; want an error saying %q", c.want)
			case c.want != "" && !strings.Contains(err.Error(), c.want):
				t.Fatalf("error %q does not say %q", err, c.want)
			}
			// What is wrong in the Secret is told apart from what is
			// wrong in the backup-target setting.
			if inSecret := c.want != "" && c.target == "s3://backups@us-east-1/"; err != nil && IsCredentialError(err) != inSecret {
				t.Errorf("IsCredentialError(%q) = %v", err, !inSecret)
			}
		})
	}
}

func s3Driver(t *testing.T, target string, cred map[string]string) *S3Driver {
	t.Helper()
	d, err := NewS3Driver(target, cred)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func wantError(t *testing.T, what string, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("%s: error %q does not say %q", what, err, f)
		}
	}
	if errors.Is(err, ErrNotExist) {
		t.Errorf("%s: error %q passes for a missing object", what, err)
	}
}

func TestS3ErrorsSayWhatIsWrong(t *testing.T) {
	srv := s3test.Start(t)
	key := "backupstore/volumes/v/volume.cfg"

	wrongSecret := srv.Credential()
	wrongSecret[CredSecretAccessKey] = "not-the-secret"
	d := s3Driver(t, srv.Target("p"), wrongSecret)
	_, err := d.Read(key, maxRecordSize)
	wantError(t, "a wrong secret", err, "access denied: check the backup-target-credential-secret", "s3://backups/p/"+key)
	if !IsCredentialError(err) {
		t.Errorf("access denied is not a credential error: %v", err)
	}
	_, err = d.Exists(key)
	wantError(t, "a wrong secret (HEAD)", err, "access denied")
	_, err = d.List("backupstore/volumes")
	wantError(t, "a wrong secret (list)", err, "access denied")

	unknownKey := srv.Credential()
	unknownKey[CredAccessKeyID] = "nobody"
	err = s3Driver(t, srv.Target(""), unknownKey).Write(key, []byte("x"))
	wantError(t, "an unknown access key", err, "access denied: check the backup-target-credential-secret", "write s3://backups/"+key)

	noBucket := s3Driver(t, "s3://no-such-bucket@us-east-1/", srv.Credential())
	err = noBucket.Write(key, []byte("x"))
	wantError(t, "a missing bucket", err, `bucket "no-such-bucket" does not exist`)
	if IsCredentialError(err) {
		t.Errorf("a missing bucket is a credential error: %v", err)
	}
	_, err = noBucket.List("backupstore/volumes")
	wantError(t, "a missing bucket (list)", err, `bucket "no-such-bucket" does not exist`)
	_, err = noBucket.Read(key, maxRecordSize)
	wantError(t, "a missing bucket (read)", err, `bucket "no-such-bucket" does not exist`)
	_, err = noBucket.Exists(key)
	wantError(t, "a missing bucket (exists)", err, `bucket "no-such-bucket" does not exist`)
	err = noBucket.Delete(key)
	wantError(t, "a missing bucket (delete)", err, `bucket "no-such-bucket" does not exist`)

	// Nothing listens on the port.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	cred := srv.Credential()
	cred[CredEndpoints] = "http://" + closed
	start := time.Now()
	err = s3Driver(t, srv.Target(""), cred).Write(key, []byte("x"))
	wantError(t, "an unreachable endpoint", err, "cannot reach the S3 server", "http://"+closed, "connection refused")
	t.Logf("unreachable endpoint: failed after %s: %v", time.Since(start).Round(time.Millisecond), err)

	cred[CredEndpoints] = strings.Replace(srv.Endpoint, "http://", "https://", 1)
	err = s3Driver(t, srv.Target(""), cred).Write(key, []byte("x"))
	wantError(t, "https to an http server", err, "AWS_ENDPOINTS")

	// And what works says nothing.
	good := s3Driver(t, srv.Target(""), srv.Credential())
	if err := good.Write(key, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := good.Read(key+".missing", maxRecordSize); !errors.Is(err, ErrNotExist) || !strings.Contains(err.Error(), key+".missing") {
		t.Fatalf("a missing object: %v", err)
	}
}

// stalledServer accepts connections and never answers.
func stalledServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + l.Addr().String()
}

func TestS3StalledServerFailsTheCall(t *testing.T) {
	cred := map[string]string{CredAccessKeyID: "id", CredSecretAccessKey: "secret", CredEndpoints: stalledServer(t)}
	d := s3Driver(t, "s3://backups@us-east-1/", cred)
	d.Timeout = 300 * time.Millisecond
	d.MinRate = 16 << 20 // a 2 MiB block gets 125 ms more
	calls := map[string]func() error{
		"write a block": func() error { return d.Write("blocks/b.blk", make([]byte, BlockSize)) },
		"read":          func() error { _, err := d.Read("volume.cfg", maxRecordSize); return err },
		"exists":        func() error { _, err := d.Exists("volume.cfg"); return err },
		"list":          func() error { _, err := d.List("backupstore/volumes"); return err },
		"delete":        func() error { return d.Delete("volume.cfg") },
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			err := call()
			took := time.Since(start)
			wantError(t, name, err, "did not answer within", "s3://backups/")
			if took > 3*time.Second {
				t.Errorf("%s took %s against a stalled server", name, took)
			}
		})
	}
}

// flakyProxy forwards to an S3 server, but cuts the connection of the
// first PUT after reading half its body.
type flakyProxy struct {
	proxy     *httputil.ReverseProxy
	puts      atomic.Int32
	cut       atomic.Bool
	fullPuts  atomic.Int32
	putLength int64
}

func (p *flakyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut {
		p.puts.Add(1)
		if !p.cut.Swap(true) {
			_, _ = io.CopyN(io.Discard, r.Body, r.ContentLength/2)
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		body, _ := io.ReadAll(r.Body)
		if int64(len(body)) == r.ContentLength {
			p.fullPuts.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	p.proxy.ServeHTTP(w, r)
}

func TestS3WriteIsRetriedWhole(t *testing.T) {
	srv := s3test.Start(t)
	backend, _ := url.Parse(srv.Endpoint)
	p := &flakyProxy{proxy: httputil.NewSingleHostReverseProxy(backend)}
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	cred := srv.Credential()
	cred[CredEndpoints] = front.URL
	d := s3Driver(t, srv.Target(""), cred)

	data := random(3, BlockSize)
	key := "backupstore/volumes/v/blocks/aa/bb/x.blk"
	if err := d.Write(key, data); err != nil {
		t.Fatalf("a write whose first attempt was cut: %v", err)
	}
	if p.puts.Load() != 2 || p.fullPuts.Load() != 1 {
		t.Errorf("%d PUTs, %d of them whole; want the cut one and one whole retry", p.puts.Load(), p.fullPuts.Load())
	}
	direct := s3Driver(t, srv.Target(""), srv.Credential())
	mustRead(t, direct, key, data)
}

func TestS3ServerRestart(t *testing.T) {
	srv := s3test.Start(t)
	d := s3Driver(t, srv.Target("x"), srv.Credential())
	mustWrite(t, d, "a/one", []byte("1"))
	srv.Stop(t)
	err := d.Write("a/two", []byte("2"))
	wantError(t, "a write while the server is down", err, "cannot reach the S3 server")
	srv.Start(t)
	mustWrite(t, d, "a/two", []byte("2"))
	mustRead(t, d, "a/one", []byte("1"))
	mustList(t, d, "a", "a/one", "a/two")
}

func TestS3CustomCA(t *testing.T) {
	srv := s3test.Start(t)
	backend, _ := url.Parse(srv.Endpoint)
	front := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(backend))
	front.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	front.StartTLS()
	t.Cleanup(front.Close)
	cred := srv.Credential()
	cred[CredEndpoints] = front.URL

	err := s3Driver(t, srv.Target(""), cred).Write("k", []byte("x"))
	wantError(t, "a server signed by an unknown CA", err, "not trusted", "set AWS_CERT")

	cred[CredCert] = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw}))
	d := s3Driver(t, srv.Target(""), cred)
	mustWrite(t, d, "k", []byte("x"))
	mustRead(t, d, "k", []byte("x"))
}

// bodyProxy forwards to an S3 server; it can flip a byte of each PUT's
// body, and drop the checksum the server echoes (as a server that does
// not check x-amz-checksum-* does).
type bodyProxy struct {
	proxy           *httputil.ReverseProxy
	corrupt         atomic.Bool
	refuseChecksums bool
	md5Puts         atomic.Int32
	crc32cPuts      atomic.Int32
}

func (p *bodyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPut {
		if r.Header.Get("Content-Md5") != "" {
			p.md5Puts.Add(1)
		}
		if r.Header.Get("X-Amz-Checksum-Crc32c") != "" {
			p.crc32cPuts.Add(1)
		}
		if r.Header.Get("X-Amz-Content-Sha256") != "UNSIGNED-PAYLOAD" {
			http.Error(w, "the body was signed: "+r.Header.Get("X-Amz-Content-Sha256"), http.StatusBadRequest)
			return
		}
		if p.refuseChecksums && r.Header.Get("X-Amz-Checksum-Crc32c") != "" {
			w.WriteHeader(http.StatusNotImplemented)
			_, _ = io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>A header you provided implies functionality that is not implemented</Message></Error>`)
			return
		}
		body, _ := io.ReadAll(r.Body)
		if p.corrupt.Load() && len(body) > 0 {
			body[len(body)/2] ^= 1
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	p.proxy.ServeHTTP(w, r)
}

func bodyProxyDriver(t *testing.T, dropEcho bool) (*bodyProxy, *S3Driver, *S3Driver) {
	srv := s3test.Start(t)
	backend, _ := url.Parse(srv.Endpoint)
	p := &bodyProxy{proxy: httputil.NewSingleHostReverseProxy(backend)}
	if dropEcho {
		p.proxy.ModifyResponse = func(r *http.Response) error {
			r.Header.Del("X-Amz-Checksum-Crc32c")
			return nil
		}
	}
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	cred := srv.Credential()
	cred[CredEndpoints] = front.URL
	return p, s3Driver(t, srv.Target(""), cred), s3Driver(t, srv.Target(""), srv.Credential())
}

// TestS3WriteBodyIsChecked: a PUT's body is not signed (a SHA-256 of
// every byte on both sides over plain HTTP) but carries a CRC32C the
// server checks: a body changed on the way is refused, not stored.
func TestS3WriteBodyIsChecked(t *testing.T) {
	p, d, direct := bodyProxyDriver(t, false)
	data := random(4, BlockSize)
	mustWrite(t, d, "a/good", data)
	mustRead(t, direct, "a/good", data)
	if got := d.bodyCheck.Load(); got != bodyCheckCRC32C || p.crc32cPuts.Load() != 1 || p.md5Puts.Load() != 0 {
		t.Fatalf("body check %d after %d CRC32C and %d MD5 PUTs; want the server to check the CRC32C", got, p.crc32cPuts.Load(), p.md5Puts.Load())
	}
	p.corrupt.Store(true)
	if err := d.Write("a/bad", data); err == nil {
		t.Fatal("a body changed on its way to the server was stored")
	} else {
		t.Logf("a changed body: %v", err)
	}
	if ok, err := direct.Exists("a/bad"); err != nil || ok {
		t.Fatalf("the changed body's object exists: %v, %v", ok, err)
	}
}

// TestS3WriteFallsBackToMD5: a server that does not echo the CRC32C may
// not have checked it; the object is sent again with Content-MD5, which
// every S3 server checks, and so are later writes.
func TestS3WriteFallsBackToMD5(t *testing.T) {
	p, d, direct := bodyProxyDriver(t, true)
	data := random(5, BlockSize)
	mustWrite(t, d, "a/one", data)
	mustWrite(t, d, "a/two", data)
	mustRead(t, direct, "a/one", data)
	mustRead(t, direct, "a/two", data)
	if p.crc32cPuts.Load() != 1 || p.md5Puts.Load() != 2 || d.bodyCheck.Load() != bodyCheckMD5 {
		t.Fatalf("%d CRC32C and %d MD5 PUTs; want the first sent again with MD5, and MD5 after", p.crc32cPuts.Load(), p.md5Puts.Load())
	}
	p.corrupt.Store(true)
	if err := d.Write("a/bad", data); err == nil {
		t.Fatal("a body changed on its way to the server was stored")
	}
}

// blockLookups is an S3Driver counting the lookups of single blocks.
type blockLookups struct {
	*S3Driver
	n atomic.Int32
}

func (d *blockLookups) Exists(key string) (bool, error) {
	if strings.HasSuffix(key, ".blk") {
		d.n.Add(1)
	}
	return d.S3Driver.Exists(key)
}

// TestFullBackupToS3ListsTheBlocksOnce: a full backup to S3 learns which
// blocks the volume has from one listing instead of a request per block,
// and still uploads only those missing.
func TestFullBackupToS3ListsTheBlocksOnce(t *testing.T) {
	tt := testTargets(t)["s3"]
	d := &blockLookups{S3Driver: tt.Driver.(*S3Driver)}
	s := NewStore(tt.Target, d)
	data := distinctBlocks(11, 6)
	for i, name := range []string{"b1", "b2"} {
		if i == 1 {
			copy(data[2*BlockSize:], random(12, 4096))
		}
		_, st, err := s.Backup(BackupRequest{Name: name, Volume: "vol", Snapshot: name, Source: &memSource{data: append([]byte(nil), data...)}})
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{6, 1}[i]; st.BlocksUploaded != want || st.BlocksReused != 6-want {
			t.Errorf("backup %s uploaded %d blocks and reused %d; want %d and %d", name, st.BlocksUploaded, st.BlocksReused, want, 6-want)
		}
		mustRestore(t, s, "vol", name, data)
	}
	if n := d.n.Load(); n != 0 {
		t.Errorf("full backups looked up %d blocks one by one", n)
	}
}

// TestS3WriteFallsBackToMD5WhereChecksumsAreRefused: a server that does
// not implement x-amz-checksum-* headers gets Content-MD5 instead.
func TestS3WriteFallsBackToMD5WhereChecksumsAreRefused(t *testing.T) {
	p, d, direct := bodyProxyDriver(t, false)
	p.refuseChecksums = true
	data := random(6, BlockSize)
	mustWrite(t, d, "a/one", data)
	mustWrite(t, d, "a/two", data)
	mustRead(t, direct, "a/one", data)
	if p.crc32cPuts.Load() != 1 || p.md5Puts.Load() != 2 || d.bodyCheck.Load() != bodyCheckMD5 {
		t.Fatalf("%d CRC32C and %d MD5 PUTs; want the refused one sent again with MD5, and MD5 after", p.crc32cPuts.Load(), p.md5Puts.Load())
	}
}
