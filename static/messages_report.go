package static

// messagesReport holds the UI strings of the report page: sold-out time, places dropped at the end (third wave), each as {English, Korean, Japanese}. builtinTables
// merges it into the three tables; the parity test checks it like the others.
var messagesReport = map[string][3]string{}
