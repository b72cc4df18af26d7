package instancemanager

import "sort"

// Running is an engine the instance manager runs, as the client last
// heard of it.
type Running struct {
	Volume string
	// ID is the engine instance's: a new one each time it starts.
	ID       string
	Endpoint string
}

// Running lists the engines the instance manager runs, by volume, as last
// heard; while it cannot be reached, those it ran before.
func (c *Client) Running() []Running {
	c.mu.Lock()
	engines := make([]*remoteEngine, 0, len(c.engines))
	for _, e := range c.engines {
		engines = append(engines, e)
	}
	c.mu.Unlock()
	out := make([]Running, 0, len(engines))
	for _, e := range engines {
		out = append(out, Running{Volume: e.ref.Volume, ID: e.ref.Id, Endpoint: e.endpoint()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Volume < out[j].Volume })
	return out
}

// Connected says whether the client follows the instance manager now: a
// watch has listed its engines and still runs.
func (c *Client) Connected() bool { return c.connected.Load() }

// Hosting is how many engines the instance manager runs, as last heard.
func (c *Client) Hosting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.engines)
}

// Lost says whether the instance manager stopped running the volume's
// engine without being asked (it died and came back, or is still down):
// the volume's engine is to start there again, where its device is.
func (c *Client) Lost(volume string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.lost[volume]
	return ok
}
