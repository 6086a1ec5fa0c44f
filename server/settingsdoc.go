package main

import (
	"fmt"
	"strings"
)

// The settings as people read them: in -h (writeSettings) and as the configuration page
// docs/CONFIGURATION.md (configDoc), both made from the settings table.

// helpWidth is where -h wraps its text: a terminal of 80 columns with room to spare.
const helpWidth = 78

// writeSettings writes every setting for -h: NAME=default and what it accepts, then its
// meaning, wrapped and indented.
func writeSettings(b *strings.Builder) {
	for _, s := range settings {
		fmt.Fprintf(b, "  %s=%s  [%s]\n", s.name, s.def, s.accepts)
		writeWrapped(b, s.help, "      ", helpWidth)
	}
}

// writeWrapped writes text as lines of at most width columns (a longer word stays whole),
// each after indent.
func writeWrapped(b *strings.Builder, text, indent string, width int) {
	line := indent
	for _, w := range strings.Fields(text) {
		if line != indent && len([]rune(line))+1+len([]rune(w)) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if line != indent {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
}

// docWidth is where the configuration page wraps its prose, as the other pages do.
const docWidth = 96

// configDocPath is the configuration page, relative to the repository root.
const configDocPath = "docs/CONFIGURATION.md"

// configDoc is docs/CONFIGURATION.md: the commands and every setting, as the tables in
// cli.go and config.go make them. `go run ./server config-doc > docs/CONFIGURATION.md`
// writes it; TestEverySettingIsDocumented fails while the file differs.
func configDoc() string {
	var b strings.Builder
	b.WriteString(`# Configuration

<!-- Generated from the settings table in server/config.go: edit the table, then run
     go run ./server config-doc > docs/CONFIGURATION.md
     (server/TestEverySettingIsDocumented fails while this page differs). -->

Every setting comes from the environment. The server parses and validates all of them once at
start: a bad value stops it with one line naming the variable (a secret's value is never
shown). The start log lists every setting with secrets masked (` + "`settings`" + `, and
` + "`set`" + ` names those taken from the environment); a ` + "`WR_`" + ` variable that is no setting is
logged as a warning naming the closest setting, since a misspelt name would otherwise leave
its default in force without a word. ` + "`waitroom -h`" + ` lists the same settings and
` + "`waitroom config`" + ` prints the values in effect.

## Commands

The binary is ` + "`/waitroom`" + ` in the container image and ` + "`go run ./server`" + ` in a checkout.

| command | what it does |
|---|---|
`)
	fmt.Fprintf(&b, "| `waitroom` | %s |\n", mdCell(serveSummary))
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(&b, "| `waitroom %s` | %s |\n", strings.TrimSpace(c.name+" "+c.args), mdCell(c.summary))
		}
	}
	b.WriteString("\nAn unknown command or argument exits 2 with the usage on stderr.\n\n### Health check\n\n")
	writeWrapped(&b, healthHelp, "", docWidth)
	b.WriteString("\n## Settings\n\n| variable | default | accepts | meaning |\n|---|---|---|---|\n")
	for _, s := range settings {
		def := "—"
		if s.def != "" {
			def = "`" + s.def + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", s.name, def, mdCell(s.accepts.String()), mdCell(s.help))
	}
	return b.String()
}

// mdCell escapes text for a Markdown table cell: a | would end the cell, a < start an HTML
// tag (<lang>.json would vanish), a * start emphasis.
func mdCell(s string) string {
	return strings.NewReplacer(`|`, `\|`, `<`, `&lt;`, `*`, `\*`).Replace(s)
}
