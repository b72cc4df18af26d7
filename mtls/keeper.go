package mtls

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/cadence-storage/longhorn-manager/types"
)

// The Secrets of the internal TLS, in the manager's namespace.
const (
	// CASecretName holds the CA bundle and its keys (ca.crt, ca.key).
	// Only the managers read it; no pod mounts it.
	CASecretName = "longhorn-internal-ca"
	// ServerSecretName holds the backing image managers' leaf (ca.crt,
	// tls.crt, tls.key; kubernetes.io/tls), mounted into their pods.
	ServerSecretName = "longhorn-internal-tls"
	// DataSourceSecretName holds the backing image data sources' leaf, of
	// RoleDataSource, mounted into their pods: a data source fetches
	// untrusted URLs, so its leaf reaches only what an export needs.
	DataSourceSecretName = "longhorn-internal-tls-data-source"
	// CAKeyFile is the key of the CA Secret that holds the CAs' keys.
	CAKeyFile = "ca.key"
)

// Intervals of the Keeper: how often it looks at the CA and the leaves,
// and how soon it tries again after a failure.
const (
	KeepEvery  = time.Hour
	RetryAfter = time.Minute
)

// Keeper keeps the internal TLS of one manager: the CA Secret (created
// on first start, rotated before it expires), this manager's own leaf in
// memory, and the leaf of the backing image servers it runs (in a folder
// for child processes, or in the servers' Secret for pods).
type Keeper struct {
	Kube      kubernetes.Interface
	Namespace string
	Log       *logrus.Entry
	Clock     clock.Clock
	// ServerDir is the folder the manager's child backing image managers
	// read their leaf from, DataSourceDir its child data sources' ("" when
	// they run as pods).
	ServerDir     string
	DataSourceDir string
	// ServerSecret keeps ServerSecretName and DataSourceSecretName, for
	// servers that run as pods.
	ServerSecret bool

	mu    sync.Mutex
	id    *Identity
	caPEM []byte
}

// Start makes this manager's identity, failing when the CA cannot be
// read or made, and keeps it until ctx ends.
func (k *Keeper) Start(ctx context.Context) (*Identity, error) {
	if err := k.Sync(ctx); err != nil {
		return nil, err
	}
	go func() {
		wait := KeepEvery
		for {
			select {
			case <-ctx.Done():
				return
			case <-k.Clock.After(wait):
			}
			wait = KeepEvery
			if err := k.Sync(ctx); err != nil && ctx.Err() == nil {
				k.Log.WithError(err).Warn("The internal TLS could not be kept; trying again in a minute")
				wait = RetryAfter
			}
		}
	}()
	return k.id, nil
}

// Identity is this manager's identity once Start or Sync has run.
func (k *Keeper) Identity() *Identity {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.id
}

// Sync reads (or makes) the CA, rotates it when due, and renews the
// leaves that are near their end or not of the current bundle.
func (k *Keeper) Sync(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.Clock.Now()
	auth, caPEM, err := k.authority(ctx, now)
	if err != nil {
		return err
	}
	if k.id == nil || !bytes.Equal(caPEM, k.caPEM) || auth.NeedsRenewal(k.id.Leaf(), now) {
		cert, err := auth.Issue(now)
		if err != nil {
			return fmt.Errorf("internal TLS: sign this manager's certificate: %w", err)
		}
		if k.id == nil {
			k.id = NewIdentity(cert, auth.Pool())
			k.id.now = k.Clock.Now
		} else {
			k.id.Set(cert, auth.Pool())
		}
		k.caPEM = caPEM
		k.Log.WithField("notAfter", cert.Leaf.NotAfter).Info("Signed this manager's internal TLS certificate")
	}
	if err := k.syncCAConfigMap(ctx, caPEM); err != nil {
		return fmt.Errorf("internal TLS: ConfigMap %s/%s: %w", k.Namespace, CAConfigMapName, err)
	}
	for _, d := range []struct{ dir, role string }{{k.ServerDir, RoleComponent}, {k.DataSourceDir, RoleDataSource}} {
		if d.dir == "" {
			continue
		}
		if err := k.syncDir(auth, caPEM, now, d.dir, d.role); err != nil {
			return fmt.Errorf("internal TLS: the servers' folder %s: %w", d.dir, err)
		}
	}
	if k.ServerSecret {
		for _, sec := range []struct{ name, role string }{{ServerSecretName, RoleComponent}, {DataSourceSecretName, RoleDataSource}} {
			if err := k.syncServerSecret(ctx, auth, caPEM, now, sec.name, sec.role); err != nil {
				return fmt.Errorf("internal TLS: Secret %s/%s: %w", k.Namespace, sec.name, err)
			}
		}
	}
	return nil
}

// authority reads the CA Secret, making it when absent and rotating it
// when due. Two managers that race agree through the apiserver: a create
// that finds the Secret there, or an update that conflicts, reads again.
func (k *Keeper) authority(ctx context.Context, now time.Time) (*Authority, []byte, error) {
	secrets := k.Kube.CoreV1().Secrets(k.Namespace)
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s, err := secrets.Get(ctx, CASecretName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			a := &Authority{}
			if _, err := a.Rotate(now); err != nil {
				return nil, nil, err
			}
			certs, keys, err := a.EncodeBundle()
			if err != nil {
				return nil, nil, err
			}
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: CASecretName, Namespace: k.Namespace,
					Labels: map[string]string{types.LabelManagedBy: types.ManagedByValue}},
				Type: corev1.SecretTypeOpaque,
				Data: map[string][]byte{CAFile: certs, CAKeyFile: keys},
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				lastErr = err
				continue
			}
			if err != nil {
				return nil, nil, fmt.Errorf("internal TLS: create Secret %s/%s: %w", k.Namespace, CASecretName, err)
			}
			k.Log.WithFields(logrus.Fields{"secret": CASecretName, "notAfter": a.CAs[0].Cert.NotAfter}).Info("Created the cluster's internal CA")
			return a, certs, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("internal TLS: read Secret %s/%s: %w", k.Namespace, CASecretName, err)
		}
		a, err := DecodeBundle(s.Data[CAFile], s.Data[CAKeyFile])
		if err != nil {
			// Never replaced silently: every server trusts this bundle.
			return nil, nil, fmt.Errorf("internal TLS: Secret %s/%s: %w (delete it for a new CA; every component then takes a new certificate)", k.Namespace, CASecretName, err)
		}
		changed, err := a.Rotate(now)
		if err != nil {
			return nil, nil, err
		}
		if !changed {
			return a, s.Data[CAFile], nil
		}
		certs, keys, err := a.EncodeBundle()
		if err != nil {
			return nil, nil, err
		}
		s.Data = map[string][]byte{CAFile: certs, CAKeyFile: keys}
		if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); apierrors.IsConflict(err) {
			lastErr = err
			continue
		} else if err != nil {
			return nil, nil, fmt.Errorf("internal TLS: rotate Secret %s/%s: %w", k.Namespace, CASecretName, err)
		}
		k.Log.WithFields(logrus.Fields{"secret": CASecretName, "cas": len(a.CAs), "newestNotAfter": a.CAs[0].Cert.NotAfter}).Info("Rotated the cluster's internal CA: a new CA joins the bundle")
		return a, certs, nil
	}
	return nil, nil, fmt.Errorf("internal TLS: Secret %s/%s kept changing: %w", k.Namespace, CASecretName, lastErr)
}

// leafOf is the first certificate of tls.crt data, or nil.
func leafOf(certPEM []byte) *x509.Certificate {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil
	}
	return certs[0]
}

// current says whether a leaf (PEM) is of role and good for now.
func current(auth *Authority, certPEM []byte, role string, now time.Time) bool {
	leaf := leafOf(certPEM)
	return leaf != nil && RoleOf(leaf) == role && !auth.NeedsRenewal(leaf, now)
}

func (k *Keeper) syncDir(auth *Authority, caPEM []byte, now time.Time, dir, role string) error {
	ca, _ := os.ReadFile(filepath.Join(dir, CAFile))
	cert, _ := os.ReadFile(filepath.Join(dir, CertFile))
	if bytes.Equal(ca, caPEM) && current(auth, cert, role, now) {
		return nil
	}
	leaf, err := auth.IssueFor(now, role)
	if err != nil {
		return err
	}
	if err := WriteDir(dir, caPEM, leaf); err != nil {
		return err
	}
	k.Log.WithFields(logrus.Fields{"dir": dir, "role": role, "notAfter": leaf.Leaf.NotAfter}).Info("Signed the backing image servers' internal TLS certificate")
	return nil
}

func (k *Keeper) syncServerSecret(ctx context.Context, auth *Authority, caPEM []byte, now time.Time, name, role string) error {
	secrets := k.Kube.CoreV1().Secrets(k.Namespace)
	s, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err == nil && bytes.Equal(s.Data[CAFile], caPEM) && current(auth, s.Data[CertFile], role, now) {
		return nil
	}
	leaf, err2 := auth.IssueFor(now, role)
	if err2 != nil {
		return err2
	}
	data, err2 := serverSecretData(caPEM, leaf)
	if err2 != nil {
		return err2
	}
	if apierrors.IsNotFound(err) {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: k.Namespace,
				Labels: map[string]string{types.LabelManagedBy: types.ManagedByValue}},
			Type: corev1.SecretTypeTLS,
			Data: data,
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil // another manager made it; the next sync checks it
		}
	} else {
		s.Data = data
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			return nil // another manager renewed it
		}
	}
	if err != nil {
		return err
	}
	k.Log.WithFields(logrus.Fields{"secret": name, "role": role, "notAfter": leaf.Leaf.NotAfter}).Info("Signed the backing image servers' internal TLS certificate")
	return nil
}

func serverSecretData(caPEM []byte, leaf tls.Certificate) (map[string][]byte, error) {
	certPEM, keyPEM, err := EncodeLeaf(leaf)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{CAFile: caPEM, CertFile: certPEM, KeyFile: keyPEM}, nil
}
