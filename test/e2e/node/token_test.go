//go:build e2enode

package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cadence-storage/longhorn-manager/test/e2e/cluster"
)

// publishedTestKey is the account-token signing key of kube-apiserver's
// test server (cmd/kube-apiserver/app/testing), which is in Kubernetes'
// sources for anyone to read.
const publishedTestKey = `-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIEZmTmUhuanLjPA2CLquXivuwBDHTt5XYwgIr/kA1LtRoAoGCCqGSM49
AwEHoUQDQgAEH6cuzP8XuD5wal6wf9M6xDljTOPLX2i8uIp/C/ASqiIGUeeKQtX0
/IR3qCXyThP/dbCiHrF3v1cuhBOHY8CLVg==
-----END EC PRIVATE KEY-----`

// The cluster's apiserver signs account tokens with a key of its own: a
// token made with the test server's published key, its claims those of a
// real token of the account, is refused, and the same claims signed with
// the cluster's key are taken (so the claims are not what is refused).
func TestTokenOfThePublishedTestKeyRefused(t *testing.T) {
	c := cluster.Get(t)
	client := c.KubeClient(t)
	ns := newNamespace(t, c, client)
	issued, err := client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claims := jwtClaims(t, issued.Status.Token)

	if user, err := whoamiWithToken(c, signES256(t, []byte(publishedTestKey), claims)); err == nil {
		t.Errorf("a token signed with the published test key was taken as %q", user)
	}
	ownKey, err := os.ReadFile(filepath.Join(c.DataDir, "controlplane", "service-account.key"))
	if err != nil {
		t.Fatal(err)
	}
	if user, err := whoamiWithToken(c, signES256(t, ownKey, claims)); err != nil || user != "system:serviceaccount:"+ns+":default" {
		t.Errorf("the claims signed with the cluster's key: user %q, error %v; want the account", user, err)
	}
}

// A Secret of type kubernetes.io/service-account-token gets a token from
// the controller manager's token controller, signed with the cluster's
// key, and the apiserver takes it as the account's.
func TestServiceAccountTokenSecretFilled(t *testing.T) {
	c := cluster.Get(t)
	client := c.KubeClient(t)
	ns := newNamespace(t, c, client)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "default-token", Annotations: map[string]string{corev1.ServiceAccountNameKey: "default"}},
		Type:       corev1.SecretTypeServiceAccountToken,
	}
	if _, err := client.CoreV1().Secrets(ns).Create(context.Background(), secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var token []byte
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := client.CoreV1().Secrets(ns).Get(ctx, secret.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		token = got.Data[corev1.ServiceAccountTokenKey]
		return len(token) > 0, nil
	})
	if err != nil {
		t.Fatalf("the token controller did not fill Secret %s/%s: %v", ns, secret.Name, err)
	}
	if user, err := whoamiWithToken(c, string(token)); err != nil || user != "system:serviceaccount:"+ns+":default" {
		t.Errorf("the Secret's token: user %q, error %v; want the account", user, err)
	}
}

func jwtClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	data, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(data, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// signES256 makes a JWT of the claims signed with the PEM EC key, without
// a key ID, so the apiserver tries each of its keys.
func signES256(t *testing.T, keyPEM []byte, claims map[string]any) string {
	t.Helper()
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		t.Fatal("no PEM key")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	header, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT"})
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signed := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	sum := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func whoamiWithToken(c *cluster.Cluster, token string) (string, error) {
	cfg := rest.AnonymousClientConfig(c.Config)
	cfg.BearerToken = token
	cfg.Timeout = 30 * time.Second
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := client.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}
