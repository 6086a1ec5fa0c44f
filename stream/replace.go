package stream

// replacedBy reports whether token is a re-admission of c's ticket with another token than
// the one c was told (the first was lost, e.g. by a Redis failover, and the ticket admitted
// again): the stream delivers it as a new admitted event. Expired, used and ended stay
// final; the caller holds the queue's lock.
func (c *conn) replacedBy(token string) bool {
	return c.admitted && !c.expired && !c.ended && c.token != "" && token != "" && token != c.token
}
