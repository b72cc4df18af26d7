package replica

import (
	"errors"
	"os"
)

// openQcow2 reads a qcow2 backing file.
func openQcow2(f *os.File) (backingReader, error) {
	return nil, errors.New("qcow2 backing files are not supported yet")
}
