package backupstore

import (
	"errors"

	"github.com/minio/minio-go/v7/pkg/credentials"
)

// errNoS3Credential is the answer to a request to an AWS target for which
// neither the credential Secret, nor the environment, nor the node's
// instance role gave keys.
var errNoS3Credential = errors.New("no credential for the S3 target: set " + CredAccessKeyID + " and " + CredSecretAccessKey +
	" in the " + credentialSecretSetting + " Secret, or give the node an instance role; requests are never sent unsigned")

// signedOnly is a credential chain that never answers with anonymous
// credentials: minio-go's chain does when no provider gives keys, and
// its requests then go unsigned, which a bucket open to anyone accepts
// (a backup target pointed at such a bucket would take a volume's data
// out with no key at all).
type signedOnly struct{ chain *credentials.Chain }

func (s signedOnly) RetrieveWithCredContext(cc *credentials.CredContext) (credentials.Value, error) {
	v, err := s.chain.RetrieveWithCredContext(cc)
	return checkSigned(v, err)
}

func (s signedOnly) Retrieve() (credentials.Value, error) {
	v, err := s.chain.Retrieve()
	return checkSigned(v, err)
}

func (s signedOnly) IsExpired() bool { return s.chain.IsExpired() }

func checkSigned(v credentials.Value, err error) (credentials.Value, error) {
	if err != nil {
		return credentials.Value{}, err
	}
	if v.AccessKeyID == "" || v.SecretAccessKey == "" || v.SignerType == credentials.SignatureAnonymous {
		return credentials.Value{}, errNoS3Credential
	}
	return v, nil
}
