package nbd

// The window export: the volume's export under the name NAME+WindowSuffix
// advertises WindowSize bytes (or the device's size, when larger). The
// device's bytes read as they are; the range past the device's end reads
// as zeros and refuses writes with ENOSPC. An NBD client learns an
// export's size once, at its handshake, so a client of the plain export
// never sees the volume grow; the CSI node's nbdfuse connects to the
// window instead, and its loop device, limited to the volume's size
// (losetup --sizelimit), is raised to the new size when the volume grows,
// with no reconnect, while the filesystem stays mounted.
const (
	WindowSuffix = "/window"
	WindowSize   = 1 << 50
)

// export says whether name is this server's export, and whether it is
// the window.
func (s *Server) export(name string) (window, known bool) {
	switch name {
	case s.name, "":
		return false, true
	case s.name + WindowSuffix:
		return true, true
	}
	return false, false
}

// exportSize is the size an export advertises.
func (s *Server) exportSize(window bool) int64 {
	if window {
		return max(s.device.Size(), WindowSize)
	}
	return s.device.Size()
}

// read fills p from the device at off; past says p reaches past the
// device's end (only on the window), where it reads as zeros.
func (s *Server) read(p []byte, off int64, past bool) error {
	if !past {
		_, err := s.device.ReadAt(p, off)
		return err
	}
	size := s.device.Size()
	n := int64(0)
	if off < size {
		n = size - off
		if _, err := s.device.ReadAt(p[:n], off); err != nil {
			return err
		}
	}
	clear(p[n:])
	return nil
}
