package pagetemplate

import (
	"fmt"
	"io"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// refusedElements are elements a page template may not carry, with the reason.
var refusedElements = map[string]string{
	"iframe": "frames are not allowed",
	"frame":  "frames are not allowed",
	"object": "object is not allowed",
	"embed":  "embed is not allowed",
	"base":   "base is not allowed (the page's CSP sets base-uri 'none')",
	"style":  "inline style is blocked by the page's CSP: link a stylesheet from this origin or a listed one",
}

// checkHTML reads src's HTML (the template actions in it are text to the tokenizer) and
// refuses what would break the page's CSP or run a script that is not from this origin
// or a listed one.
func checkHTML(src string, origins []string) error {
	z := html.NewTokenizer(strings.NewReader(src))
	off := 0
	for {
		tt := z.Next()
		raw := len(z.Raw())
		line := lineOf(src, off)
		off += raw
		switch tt {
		case html.ErrorToken:
			if z.Err() == io.EOF {
				return nil
			}
			return &Error{Line: line, Reason: "unreadable HTML: " + z.Err().Error()}
		case html.StartTagToken, html.SelfClosingTagToken:
		default:
			continue
		}
		tok := z.Token()
		if why, bad := refusedElements[tok.Data]; bad {
			return &Error{Line: line, Reason: fmt.Sprintf("<%s>: %s", tok.Data, why)}
		}
		attr := map[string]string{}
		for _, a := range tok.Attr {
			key := strings.ToLower(a.Key)
			attr[key] = a.Val
			switch {
			case strings.HasPrefix(key, "on"):
				return &Error{Line: line, Reason: fmt.Sprintf("<%s %s>: event-handler attributes are inline script, blocked by the page's CSP", tok.Data, key)}
			case key == "style":
				return &Error{Line: line, Reason: fmt.Sprintf("<%s style>: inline style is blocked by the page's CSP: use a class and a stylesheet", tok.Data)}
			case key == "href" || key == "src" || key == "action" || key == "formaction" || key == "srcset" || key == "poster":
				if strings.HasPrefix(strings.ToLower(strings.TrimSpace(a.Val)), "javascript:") {
					return &Error{Line: line, Reason: fmt.Sprintf("<%s %s>: javascript: URLs are not allowed", tok.Data, key)}
				}
			}
		}
		switch tok.Data {
		case "script":
			src, ok := attr["src"]
			if !ok {
				return &Error{Line: line, Reason: "<script> without src: inline script is blocked by the page's CSP"}
			}
			if err := allowedURL(src, origins); err != "" {
				return &Error{Line: line, Reason: "<script src>: " + err}
			}
		case "link":
			if strings.Contains(strings.ToLower(attr["rel"]), "stylesheet") {
				if err := allowedURL(attr["href"], origins); err != "" {
					return &Error{Line: line, Reason: "<link rel=stylesheet href>: " + err}
				}
			}
		case "img", "source":
			if s, ok := attr["src"]; ok && !strings.HasPrefix(s, "data:") {
				if err := allowedURL(s, origins); err != "" {
					return &Error{Line: line, Reason: fmt.Sprintf("<%s src>: %s", tok.Data, err)}
				}
			}
		case "form":
			if a, ok := attr["action"]; ok && a != "" {
				if err := allowedURL(a, nil); err != "" {
					return &Error{Line: line, Reason: "<form action>: " + err + " (forms post to this origin only)"}
				}
			}
		case "meta":
			if strings.EqualFold(attr["http-equiv"], "content-security-policy") || strings.EqualFold(attr["http-equiv"], "refresh") {
				return &Error{Line: line, Reason: "<meta http-equiv>: the page's policy and refresh are the server's"}
			}
		}
	}
}

// allowedURL returns "" when u is on this origin (a path, or a template action that the
// server fills) or on a listed origin, else why not.
func allowedURL(u string, origins []string) string {
	u = strings.TrimSpace(u)
	if u == "" {
		return "empty URL"
	}
	if strings.HasPrefix(u, "{{") {
		return "a URL from a template action is not allowed here: write the URL"
	}
	if strings.HasPrefix(u, "/") && !strings.HasPrefix(u, "//") {
		return ""
	}
	p, err := url.Parse(u)
	if err != nil || p.Scheme == "" && p.Host == "" {
		// A relative path such as "style.css" resolves on this origin.
		if err == nil && !strings.Contains(u, ":") {
			return ""
		}
		return fmt.Sprintf("%q is not a URL", u)
	}
	origin := strings.ToLower(p.Scheme + "://" + p.Host)
	for _, o := range origins {
		if strings.EqualFold(strings.TrimRight(o, "/"), origin) {
			return ""
		}
	}
	if len(origins) == 0 {
		return fmt.Sprintf("%s is not this origin, and the queue lists no other origin", origin)
	}
	return fmt.Sprintf("%s is not this origin or a listed one (%s)", origin, strings.Join(origins, ", "))
}

// CSP returns the page's Content-Security-Policy for a template whose page may load from
// origins: the default page's, with each origin added to script-src, style-src and img-src.
func CSP(origins []string) string {
	extra := ""
	for _, o := range origins {
		extra += " " + o
	}
	return "default-src 'self'; script-src 'self'" + extra + "; style-src 'self'" + extra + "; img-src 'self' data:" + extra + "; " +
		"connect-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'self'; object-src 'none'"
}

// CheckOrigins validates an operator's list of origins a template may load from: each
// "https://host" or "https://host:port" (http only for localhost), no path.
func CheckOrigins(origins []string) error {
	if len(origins) > 8 {
		return &Error{Reason: "at most 8 origins"}
	}
	for _, o := range origins {
		p, err := url.Parse(o)
		if err != nil || p.Host == "" || (p.Path != "" && p.Path != "/") || p.RawQuery != "" || p.User != nil {
			return &Error{Reason: fmt.Sprintf("origin %q: want https://host[:port]", o)}
		}
		host := p.Hostname()
		if p.Scheme != "https" && !(p.Scheme == "http" && (host == "localhost" || host == "127.0.0.1")) {
			return &Error{Reason: fmt.Sprintf("origin %q: https only (http for localhost)", o)}
		}
		if strings.ContainsAny(o, " ;'\"") {
			return &Error{Reason: fmt.Sprintf("origin %q: not allowed in a CSP", o)}
		}
	}
	return nil
}
