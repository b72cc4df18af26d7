package replicaproto

// The ops of version 2 that change a replica's chain or size (a
// snapshot's removal, a revert, a purge, a growth) and the trim that
// keeps the snapshots an engine's views read: the server's side and the
// client's.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cadence-storage/longhorn-manager/engine/replica"
)

// ErrOldServer marks an op the replica's server does not know: it speaks
// an older version of the protocol (its instance manager is older than
// the engine's). Nothing is sent: a server closes the connection at an
// op it does not know.
var ErrOldServer = errors.New("the replica's server speaks an older version of the replica protocol")

// invalid is the answer to a request the protocol allows but whose body
// says nothing the replica can do.
func invalid(format string, args ...any) result {
	return result{status: statusInvalid, body: []byte(fmt.Sprintf(format, args...))}
}

// doControl carries out an op of version 2 for the session's engine.
func (ss *session) doControl(h header, body []byte) result {
	var err error
	switch h.kind {
	case OpMarkRemoved, OpRevert:
		name := string(body)
		if nerr := replica.CheckSnapshotName(name); nerr != nil {
			return invalid("%v", nerr)
		}
		if h.kind == OpMarkRemoved {
			err = ss.rep.MarkRemoved(name)
		} else {
			err = ss.rep.Revert(name)
		}
		if errors.Is(err, replica.ErrNotFound) {
			return result{status: statusNotFound, body: []byte(err.Error())}
		}
	case OpPurge:
		start := time.Now()
		var purged []string
		if purged, err = ss.rep.Purge(); err != nil {
			break
		}
		ss.log.WithField("purged", purged).WithField("took", time.Since(start).Round(time.Millisecond)).Info("Replica protocol: purged removed snapshots")
		if purged == nil {
			purged = []string{}
		}
		out, _ := json.Marshal(purged)
		if len(out) > maxNamesBody {
			// A replica holds at most replica.MaxSnapshots snapshots of
			// bounded names: never reached.
			err = fmt.Errorf("the purge's %d names take %d bytes, above the %d a reply carries", len(purged), len(out), maxNamesBody)
			break
		}
		return result{status: statusOK, body: out}
	case OpGrow:
		if limit := ss.growLimit; h.offset > limit {
			return invalid("a growth to %d bytes, above the %d the replica protocol carries", h.offset, limit)
		}
		err = ss.rep.Grow(int64(h.offset))
	case OpTrimKeeping:
		req, msg := parseTrim(body)
		if msg != "" {
			return invalid("%s", msg)
		}
		if size := uint64(ss.rep.Size()); req.Length > size-h.offset {
			return invalid("a trim of %d+%d is past the replica's %d bytes", h.offset, req.Length, size)
		}
		err = ss.rep.TrimKeeping(int64(h.offset), int64(req.Length), req.Keep)
	default:
		return invalid("op %d", h.kind)
	}
	if err != nil {
		return failure(err)
	}
	return result{status: statusOK}
}

// parseTrim reads a TrimRequest, or says what is wrong with it.
func parseTrim(body []byte) (TrimRequest, string) {
	var req TrimRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return req, "a malformed trim request"
	}
	if req.Length > math.MaxInt64 {
		return req, fmt.Sprintf("a trim of %d bytes", req.Length)
	}
	if len(req.Keep) > replica.MaxSnapshots {
		return req, fmt.Sprintf("a trim keeping %d snapshots, above the %d a replica has", len(req.Keep), replica.MaxSnapshots)
	}
	for _, n := range req.Keep {
		if err := replica.CheckSnapshotName(n); err != nil {
			return req, fmt.Sprintf("a trim's keep list: %v", err)
		}
	}
	return req, ""
}

// Version is the protocol version of the replica's server: 1 for a
// server that said none when the replica was opened.
func (c *Client) Version() int { return c.open.version() }

// Carries tells whether the replica's server knows the ops of version 2:
// a snapshot's removal, a revert, a purge, a growth and a trim's keep
// list.
func (c *Client) Carries() bool { return c.Version() >= 2 }

// needs refuses op when the server's version is below 2.
func (c *Client) needs(op string) error {
	if c.Carries() {
		return nil
	}
	return fmt.Errorf("%s: %w (version %d; this client speaks %d)", op, ErrOldServer, c.Version(), ProtocolVersion)
}

// nameBody is a snapshot's name as a request carries it, refused here as
// the server would refuse it.
func nameBody(name string) ([]byte, error) {
	if err := replica.CheckSnapshotName(name); err != nil {
		return nil, fmt.Errorf("%w: %v", replica.ErrNotFound, err)
	}
	return []byte(name), nil
}

// MarkRemoved marks snapshot name removed, once every request before it
// on the connection is done. A name no snapshot may have is
// replica.ErrNotFound, as is a snapshot the replica does not have.
func (c *Client) MarkRemoved(name string) error {
	if err := c.needs("deleting a snapshot"); err != nil {
		return err
	}
	body, err := nameBody(name)
	if err != nil {
		return err
	}
	_, err = c.do(OpMarkRemoved, 0, uint32(len(body)), body)
	return err
}

// Revert makes the head an empty layer on snapshot name, once every
// request before it on the connection is done.
func (c *Client) Revert(name string) error {
	if err := c.needs("revert"); err != nil {
		return err
	}
	body, err := nameBody(name)
	if err != nil {
		return err
	}
	_, err = c.do(OpRevert, 0, uint32(len(body)), body)
	return err
}

// Purge merges the replica's removed snapshots into their children, once
// every request before it on the connection is done, within the control
// deadline (ControlTimeout), and returns the names of those purged. The
// server reads no request after it until it is done.
func (c *Client) Purge() ([]string, error) {
	if err := c.needs("purge"); err != nil {
		return nil, err
	}
	body, err := c.doWithin(c.controlTimeout, OpPurge, 0, 0, nil)
	if err != nil {
		return nil, err
	}
	var purged []string
	if err := json.Unmarshal(body, &purged); err != nil || len(purged) > replica.MaxSnapshots {
		err = fmt.Errorf("%w: a malformed purge's answer", ErrProtocol)
		c.fail(err)
		return nil, err
	}
	return purged, nil
}

// Grow makes the replica size bytes long, once every request before it on
// the connection is done, within the control deadline; Size says the new
// size from then on.
func (c *Client) Grow(size int64) error {
	if err := c.needs("grow"); err != nil {
		return err
	}
	if size < 0 || size > MaxGrowSize {
		return fmt.Errorf("grow to %d bytes: above the %d the replica protocol carries", size, int64(MaxGrowSize))
	}
	if _, err := c.doWithin(c.controlTimeout, OpGrow, uint64(size), 0, nil); err != nil {
		return err
	}
	c.size.Store(size)
	return nil
}

// TrimKeeping is Trim keeping the snapshots named in keep as if a view
// read them (replica.TrimKeeping). Without keep it is Trim; a server of
// version 1 cannot be told keep and is refused (ErrOldServer).
func (c *Client) TrimKeeping(off, length int64, keep []string) error {
	keep = uniqueNames(keep)
	if len(keep) == 0 {
		return c.Trim(off, length)
	}
	if err := c.needs("a trim keeping snapshots"); err != nil {
		return err
	}
	if len(keep) > replica.MaxSnapshots {
		return fmt.Errorf("a trim keeping %d snapshots, above the %d a replica has", len(keep), replica.MaxSnapshots)
	}
	for length > 0 {
		n := min(length, 1<<30)
		body, err := json.Marshal(TrimRequest{Length: uint64(n), Keep: keep})
		if err != nil {
			return err
		}
		if len(body) > maxNamesBody {
			return fmt.Errorf("a trim's keep list takes %d bytes, above the %d the replica protocol carries", len(body), maxNamesBody)
		}
		if _, err := c.do(OpTrimKeeping, uint64(off), uint32(len(body)), body); err != nil {
			return err
		}
		off, length = off+n, length-n
	}
	return nil
}

// uniqueNames is names without repeats, in their first order: an
// engine's replicas' views may read the same snapshot.
func uniqueNames(names []string) []string {
	if len(names) < 2 {
		return names
	}
	seen := make(map[string]bool, len(names))
	out := make([]string, 0, len(names))
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
