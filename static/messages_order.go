package static

// messagesOrder holds the UI strings of the order page that belongs to its queue (third wave), each as {English, Korean, Japanese}. builtinTables
// merges it into the three tables; the parity test checks it like the others.
var messagesOrder = map[string][3]string{}
