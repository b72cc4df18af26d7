package mtls

import (
	"crypto/tls"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func newAuthority(t *testing.T, now time.Time) *Authority {
	t.Helper()
	a := &Authority{}
	if changed, err := a.Rotate(now); err != nil || !changed {
		t.Fatalf("a first CA: changed %v, %v", changed, err)
	}
	return a
}

func TestRotateAddsANewCABeforeTheOldExpiresAndDropsItAfter(t *testing.T) {
	a := newAuthority(t, t0)
	first := a.CAs[0].Cert
	if changed, _ := a.Rotate(t0.Add(CALifetime - CARotateBefore - time.Hour)); changed {
		t.Fatal("rotated a CA with more than CARotateBefore left")
	}
	due := t0.Add(CALifetime - CARotateBefore + time.Hour)
	if changed, err := a.Rotate(due); err != nil || !changed || len(a.CAs) != 2 {
		t.Fatalf("due: changed %v, %d CAs, %v", changed, len(a.CAs), err)
	}
	if !a.CAs[1].Cert.Equal(first) {
		t.Fatal("the old CA must stay in the bundle, after the new one")
	}
	// The new CA signs only once it is a day old, so every peer trusts
	// it first.
	if s, _ := a.Signer(due.Add(time.Hour)); !s.Cert.Equal(first) {
		t.Error("a CA an hour old signs")
	}
	if s, _ := a.Signer(due.Add(CAUsableAfter + time.Hour)); s.Cert.Equal(first) {
		t.Error("a CA over a day old does not sign")
	}
	if changed, _ := a.Rotate(first.NotAfter.Add(time.Second)); !changed || len(a.CAs) != 1 || a.CAs[0].Cert.Equal(first) {
		t.Fatalf("after the old CA expired: %d CAs", len(a.CAs))
	}
}

func TestAFirstCASignsAtOnce(t *testing.T) {
	a := newAuthority(t, t0)
	if _, err := a.Issue(t0); err != nil {
		t.Fatal(err)
	}
}

func TestLeavesAreRenewedNearTheirEndOrWhenTheirCAIsGone(t *testing.T) {
	a := newAuthority(t, t0)
	leaf, err := a.Issue(t0)
	if err != nil {
		t.Fatal(err)
	}
	if a.NeedsRenewal(leaf.Leaf, t0.Add(LeafLifetime-LeafRenewBefore-time.Hour)) {
		t.Error("renewed with more than LeafRenewBefore left")
	}
	if !a.NeedsRenewal(leaf.Leaf, t0.Add(LeafLifetime-LeafRenewBefore+time.Hour)) {
		t.Error("not renewed with less than LeafRenewBefore left")
	}
	other := newAuthority(t, t0)
	if !other.NeedsRenewal(leaf.Leaf, t0) {
		t.Error("a leaf of another CA is not renewed")
	}
	if !a.NeedsRenewal(nil, t0) {
		t.Error("no leaf is not renewed")
	}
}

func TestALeafNeverOutlivesItsCA(t *testing.T) {
	a := newAuthority(t, t0)
	late := a.CAs[0].Cert.NotAfter.Add(-time.Hour)
	leaf, err := a.Issue(late)
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Leaf.NotAfter.After(a.CAs[0].Cert.NotAfter) {
		t.Errorf("leaf until %s, CA until %s", leaf.Leaf.NotAfter, a.CAs[0].Cert.NotAfter)
	}
}

func TestBundleRoundTripsAndRefusesAMissingKey(t *testing.T) {
	a := newAuthority(t, t0)
	a.Rotate(t0.Add(CALifetime - CARotateBefore + time.Hour))
	certs, keys, err := a.EncodeBundle()
	if err != nil {
		t.Fatal(err)
	}
	b, err := DecodeBundle(certs, keys)
	if err != nil || len(b.CAs) != 2 || !b.CAs[0].Cert.Equal(a.CAs[0].Cert) {
		t.Fatalf("decoded %v, %v", b, err)
	}
	one := &Authority{CAs: a.CAs[:1]}
	_, oneKey, _ := one.EncodeBundle()
	if _, err := DecodeBundle(certs, oneKey); err == nil {
		t.Error("a bundle with a CA and no key for it is accepted")
	}
	if _, err := DecodeBundle([]byte("junk"), keys); err == nil {
		t.Error("junk is accepted")
	}
	leaf, _ := a.Issue(t0)
	leafPEM, leafKey, _ := EncodeLeaf(leaf)
	if _, err := DecodeBundle(leafPEM, leafKey); err == nil {
		t.Error("a leaf is accepted as a CA")
	}
	if _, err := tls.X509KeyPair(leafPEM, leafKey); err != nil {
		t.Errorf("EncodeLeaf: %v", err)
	}
}
