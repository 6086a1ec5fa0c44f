package static

// messagesPlatform holds the UI strings of shared texts: the logo limit, languages, each as
// {English, Korean, Japanese}. builtinTables merges it into the three tables; the parity test
// checks it like the others.
var messagesPlatform = map[string][3]string{}
