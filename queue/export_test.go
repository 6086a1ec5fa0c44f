package queue

// SetAfterDrawBatch makes a run f after each batch of a draw: a test stretches a draw past
// its lease by pausing there, not by making the machine work.
func SetAfterDrawBatch(a *Admitter, f func()) { a.afterDrawBatch = f }

// ShardOfID is the pre-queue shard of a ticket id of n (prequeue.go).
func ShardOfID(id string, n int) int { return shardOfID(id, n) }
