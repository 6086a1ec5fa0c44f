package queue

// SetAfterDrawBatch makes a run f after each batch of a draw: a test stretches a draw past
// its lease by pausing there, not by making the machine work.
func SetAfterDrawBatch(a *Admitter, f func()) { a.afterDrawBatch = f }

// AssembledScriptSHA1 is the SHA1 under which Redis knows script file f when the package
// puts a prelude before it (join.lua, admit.lua: script.go); ok is false for a script that
// runs as its file is.
func AssembledScriptSHA1(f string) (sha string, ok bool) {
	switch f {
	case "join.lua":
		return joinScript.Hash(), true
	case "admit.lua":
		return admitScript.Hash(), true
	}
	return "", false
}
