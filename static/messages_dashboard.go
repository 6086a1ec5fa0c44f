package static

// messagesDashboard holds the UI strings of the dashboard: products, confirmations of irreversible actions, the commitment (third wave), each as {English, Korean, Japanese}. builtinTables
// merges it into the three tables; the parity test checks it like the others.
var messagesDashboard = map[string][3]string{}
