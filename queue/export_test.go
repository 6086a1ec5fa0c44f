package queue

// SetAfterDrawBatch makes a run f after each batch of a draw: a test stretches a draw past
// its lease by pausing there, not by making the machine work.
func SetAfterDrawBatch(a *Admitter, f func()) { a.afterDrawBatch = f }
