package backupstore

import (
	"net/url"
	"path"
	"strings"
)

// NormalTarget is a target URL with its path cleaned and no trailing
// slash, and no query or fragment, so that file:///b/ and file:///b/x/..
// compare equal: the form in which two targets, or a backup URL's target
// and a BackupTarget's URL, are compared.
func NormalTarget(target string) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", err
	}
	u.RawQuery, u.Fragment = "", ""
	if u.Path != "" {
		u.Path = strings.TrimSuffix(path.Clean(u.Path), "/")
	}
	u.RawPath = ""
	return u.String(), nil
}

// SameTarget reports whether a and b name the same target; a URL that
// does not parse is the same as none.
func SameTarget(a, b string) bool {
	na, errA := NormalTarget(a)
	nb, errB := NormalTarget(b)
	return errA == nil && errB == nil && na != "" && na == nb
}
