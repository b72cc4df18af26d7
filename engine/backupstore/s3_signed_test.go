package backupstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7/pkg/credentials"
)

// emptyProvider gives no keys, as the environment and the instance role
// do on a node that has neither.
type emptyProvider struct{}

func (emptyProvider) RetrieveWithCredContext(*credentials.CredContext) (credentials.Value, error) {
	return credentials.Value{}, errors.New("none here")
}
func (emptyProvider) Retrieve() (credentials.Value, error) {
	return credentials.Value{}, errors.New("none here")
}
func (emptyProvider) IsExpired() bool { return true }

// A target with no keys from anywhere gets an error naming what to set,
// never the anonymous credentials minio-go's chain falls back to (its
// requests would go unsigned, and a bucket open to anyone would take the
// volume's data); keys from any provider of the chain are used.
func TestAnS3TargetWithNoKeysIsNeverUnsigned(t *testing.T) {
	none := credentials.New(signedOnly{chain: &credentials.Chain{Providers: []credentials.Provider{emptyProvider{}, emptyProvider{}}}})
	if v, err := none.Get(); err == nil || !errors.Is(err, errNoS3Credential) || !strings.Contains(err.Error(), CredAccessKeyID) {
		t.Fatalf("no keys anywhere: %+v, %v; want an error naming %s", v, err, CredAccessKeyID)
	}
	// minio-go's own chain answers anonymous here: the guard is needed.
	if v, _ := credentials.NewChainCredentials([]credentials.Provider{emptyProvider{}}).Get(); v.SignerType != credentials.SignatureAnonymous {
		t.Fatalf("the plain chain answered %+v; the test no longer shows the fallback it guards against", v)
	}
	keys := credentials.New(signedOnly{chain: &credentials.Chain{Providers: []credentials.Provider{emptyProvider{},
		&credentials.Static{Value: credentials.Value{AccessKeyID: "AKID", SecretAccessKey: "secret", SignerType: credentials.SignatureV4}}}}})
	if v, err := keys.Get(); err != nil || v.AccessKeyID != "AKID" {
		t.Fatalf("keys from the chain: %+v, %v", v, err)
	}
}
