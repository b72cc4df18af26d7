package mtls

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cadence-storage/longhorn-manager/internal/atomicfile"
)

// The files of a leaf folder, as a kubernetes.io/tls Secret names them.
const (
	CAFile   = "ca.crt"
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// reloadEvery is how often a folder is read again for a renewed leaf.
var reloadEvery = 30 * time.Second

// LoadDir is the identity in dir (ca.crt, tls.crt, tls.key), read again
// at most every 30 s when a connection is made, so a leaf the manager
// renews there (or in the Secret mounted there) is taken up without a
// restart. A folder that cannot be read later keeps the last good
// identity, with a warning.
func LoadDir(dir string, log *logrus.Entry) (*Identity, error) {
	files, err := readDir(dir)
	if err != nil {
		return nil, err
	}
	cert, pool, err := files.parse()
	if err != nil {
		return nil, fmt.Errorf("--tls-dir %s: %w", dir, err)
	}
	id := NewIdentity(cert, pool)
	var mu sync.Mutex
	last, loaded := time.Now(), files
	id.reload = func() {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(last) < reloadEvery {
			return
		}
		last = time.Now()
		files, err := readDir(dir)
		if err == nil && files.equal(loaded) {
			return
		}
		var cert tls.Certificate
		if err == nil {
			cert, pool, err = files.parse()
		}
		if err != nil {
			log.WithError(err).WithField("dir", dir).Warn("The TLS folder cannot be read again; keeping the last identity")
			return
		}
		loaded = files
		id.Set(cert, pool)
		log.WithFields(logrus.Fields{"dir": dir, "notAfter": cert.Leaf.NotAfter}).Info("Took up a renewed TLS identity")
	}
	return id, nil
}

type dirFiles struct{ ca, cert, key []byte }

func readDir(dir string) (dirFiles, error) {
	var f dirFiles
	var err error
	for name, dst := range map[string]*[]byte{CAFile: &f.ca, CertFile: &f.cert, KeyFile: &f.key} {
		if *dst, err = os.ReadFile(filepath.Join(dir, name)); err != nil {
			return f, fmt.Errorf("--tls-dir: %w", err)
		}
	}
	return f, nil
}

func (f dirFiles) equal(o dirFiles) bool {
	return bytes.Equal(f.ca, o.ca) && bytes.Equal(f.cert, o.cert) && bytes.Equal(f.key, o.key)
}

func (f dirFiles) parse() (tls.Certificate, *x509.CertPool, error) {
	cas, err := ParseCertificates(f.ca)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("%s: %w", CAFile, err)
	}
	cert, err := tls.X509KeyPair(f.cert, f.key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("%s and %s: %w", CertFile, KeyFile, err)
	}
	if cert.Leaf == nil {
		return tls.Certificate{}, nil, errors.New(CertFile + ": no leaf")
	}
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca)
	}
	return cert, pool, nil
}

// WriteDir writes an identity's files into dir (made 0700), each file
// replaced whole and readable only by its owner.
func WriteDir(dir string, caPEM []byte, cert tls.Certificate) error {
	certPEM, keyPEM, err := EncodeLeaf(cert)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The key first, the CA last: a reader that sees the new CA file sees
	// the leaf it goes with.
	for _, f := range []struct {
		name string
		data []byte
	}{{KeyFile, keyPEM}, {CertFile, certPEM}, {CAFile, caPEM}} {
		if err := atomicfile.WriteFile(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}
