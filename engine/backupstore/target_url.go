package backupstore

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"strings"
)

// NormalTarget is a target URL with its path cleaned and no trailing
// slash, and no query or fragment, so that file:///b/ and file:///b/x/..
// compare equal: the form in which a URL is shown and signed (see
// engine/rpc). Whether two URLs keep their backups in one place is
// TargetLocation's to say.
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

// TargetLocation is where a target URL (or a backup URL, whose query is
// dropped) keeps its backups, spelled one way, so that two targets that
// would share their backups compare equal however their URLs are
// written:
//
//   - file://: the folder, as FileDriver opens it: the host is not read
//     (file://localhost/x is file:///x), the path is cleaned (trailing
//     slashes, . and ..) and its symbolic links are resolved as far as
//     the path exists, so a link to a folder is that folder.
//   - s3://: the bucket and the prefix in it, cleaned. The region is not
//     part of it: a bucket's name is the bucket, and the region in the
//     URL only says where to ask. Nor is the endpoint, which lives in
//     the credential Secret and changes without the target changing: two
//     targets of one bucket and prefix are taken to be one place.
//   - any other scheme: its NormalTarget.
//
// The empty URL is no place: "". A URL that does not parse, or a file://
// one whose path is not absolute, is an error.
func TargetLocation(target string) (string, error) {
	if target == "" {
		return "", nil
	}
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("backup target %q: %v", target, err)
	}
	switch u.Scheme {
	case "file":
		if !path.IsAbs(u.Path) {
			return "", fmt.Errorf("backup target %q: file:// needs an absolute path", target)
		}
		return "file://" + resolveExisting(path.Clean(u.Path)), nil
	case "s3":
		if u.User == nil || u.User.Username() == "" {
			return "", fmt.Errorf("backup target %q: the bucket is missing: use s3://<bucket>@<region>/<path>", target)
		}
		prefix := strings.Trim(path.Clean("/"+u.Path), "/")
		return "s3://" + strings.ToLower(u.User.Username()) + "/" + prefix, nil
	}
	return NormalTarget(target)
}

// resolveExisting resolves the symbolic links of the longest part of the
// clean absolute path p that exists, and appends the rest as it is.
func resolveExisting(p string) string {
	rest := ""
	for dir := p; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return path.Join(real, rest)
		} else if !errors.Is(err, fs.ErrNotExist) || dir == "/" {
			// Unreadable (a permission, a loop): the path as written.
			return p
		}
		rest = path.Join(filepath.Base(dir), rest)
	}
}

// SameTarget reports whether a and b keep their backups in one place
// (TargetLocation); a URL that does not parse is the same as none.
func SameTarget(a, b string) bool {
	la, errA := TargetLocation(a)
	lb, errB := TargetLocation(b)
	return errA == nil && errB == nil && la != "" && la == lb
}
