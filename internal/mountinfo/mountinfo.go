// Package mountinfo reads a mount table, /proc/<pid>/mountinfo (proc(5)):
// the CSI Node service reads its own to find what is mounted where, and
// the filesystem trim the host's, to find where a volume's device is
// mounted.
package mountinfo

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// Entry is one line of a mountinfo table.
type Entry struct {
	// Dev is the filesystem's device number, "major:minor".
	Dev string
	// Point is where it is mounted, Options the mount's options.
	Point, Options string
	// FsType and Source are the filesystem's type and source (the
	// device, for a block device's filesystem).
	FsType, Source string
}

// Self lists this process's mounts.
func Self() ([]Entry, error) { return Read("/proc/self/mountinfo") }

// Read reads the mountinfo table at path.
func Read(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Parse reads a mountinfo table; a line it cannot read is left out.
func Parse(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(fields) < sep+3 {
			continue
		}
		out = append(out, Entry{
			Dev: fields[2], Point: unescape(fields[4]), Options: fields[5],
			FsType: fields[sep+1], Source: unescape(fields[sep+2]),
		})
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
